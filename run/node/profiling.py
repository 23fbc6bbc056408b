"""Profiling as a config block: which profiler, which window, where traces go, the nsys command.

Loads no torch, so analysis/ imports its file names; the profilers a rank runs are in
run/node/profilers.py. The window is data (experiments/matrix.yaml, `profiling:` per workload):
wait_steps before it opens, warmup_steps recorded but discarded, active_steps recorded (0: to the
end), max_seconds of recording at most (0: no limit; the paper's LLM profiles cover 720 s), and
torch_max_active_steps: Kineto keeps the whole window in memory and a 20-epoch run overflows its
buffers (a partial trace); nsys streams to disk and takes the whole window.
profile_metrics.csv is written after the run by `python -m analysis.profiles.collect`, called as
a program: run/ imports no analysis.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

from run import store
from run.errors import UserError

TORCH_TRACE_DIR = "torch_traces"
NSYS_DIR = "nsys"
PROFILING_PLAN = "profiling.json"
# How nsys bounded its recording (analysis/profiles/nsys_sqlite.py picks its wall time from it)
NSYS_CAPTURE_KEY = "nsys_capture"
CAPTURE_API = "cudaProfilerApi"  # --capture-range=cudaProfilerApi: the loop's start/stop window
CAPTURE_DURATION = "duration"  # --duration=max_seconds from the start
CAPTURE_WHOLE = "whole run"  # neither: nsys records the whole run
PROFILE_WALL_KEY = "profile_wall"
PROFILE_METRICS = "profile_metrics.csv"
PROFILE_BREAKDOWN = "profile_breakdown.csv"
TORCH_TRACE_GLOB = "*.pt.trace.json*"
NSYS_TRACES = "cuda,nvtx,osrt,cudnn,cublas"

# Used when a run folder has no profiling.json (a run started by hand).
DEFAULT_WINDOW: dict[str, int | float] = {
    "wait_steps": 1,
    "warmup_steps": 1,
    "active_steps": 3,
    "max_seconds": 0,
    "torch_max_active_steps": 200,
}


class ProfilingError(UserError):
    """A profiling window or choice that cannot work; the message is one line."""


# --- the window ----------------------------------------------------------------------------------


def check_window(window: dict[str, Any]) -> dict[str, Any]:
    unknown = set(window) - set(DEFAULT_WINDOW)
    if unknown:
        raise ProfilingError(f"unknown profiling window key(s): {', '.join(sorted(unknown))}")
    out = {**DEFAULT_WINDOW, **window}
    for key in ("wait_steps", "warmup_steps", "active_steps", "torch_max_active_steps"):
        if not isinstance(out[key], int) or isinstance(out[key], bool) or out[key] < 0:
            raise ProfilingError(f"profiling {key}={out[key]!r} must be an integer >= 0")
    if out["torch_max_active_steps"] < 1:
        raise ProfilingError("profiling torch_max_active_steps must be at least 1")
    if not isinstance(out["max_seconds"], (int, float)) or out["max_seconds"] < 0:
        raise ProfilingError(f"profiling max_seconds={out['max_seconds']!r} must be >= 0")
    return out


def fit_window(
    window: dict[str, Any], steps: int, profiler: str
) -> tuple[dict[str, Any], list[str]]:
    """The window a run of `steps` steps can hold, and why it differs from `window`.

    A window longer than the run never closes (no trace): wait shrinks first (to a quarter of the
    run), then warm-up (to a quarter of what is left), then the active steps.
    """
    w = check_window(window)
    steps = max(int(steps), 1)
    why: list[str] = []
    wait, warmup, active = w["wait_steps"], w["warmup_steps"], w["active_steps"]
    need = wait + warmup + max(active, 1)
    if need > steps:
        wait = min(wait, steps // 4)
        warmup = min(warmup, (steps - wait) // 4)
        why.append(
            f"the run has {steps} steps, the window asked for {need} "
            f"(wait {w['wait_steps']}, warm-up {w['warmup_steps']}, active {active or 'to the end'})"
        )
    left = steps - wait - warmup
    if active == 0 or active > left:
        active = left
    if profiler == "torch" and active > w["torch_max_active_steps"]:
        active = w["torch_max_active_steps"]
        why.append(
            f"torch.profiler records at most {active} active steps (Kineto keeps the whole "
            "window in memory)"
        )
    return {**w, "wait_steps": wait, "warmup_steps": warmup, "active_steps": active}, why


def record_fit(
    run_dir: Path, requested: dict[str, Any], fitted: dict[str, Any], why: list[str], steps: int
) -> None:
    """Add the window a run really used to its RUN/profiling.json (rank 0 calls this)."""
    path = run_dir / PROFILING_PLAN
    plan = store.read_json(path) if path.is_file() else {**requested}
    plan["effective"] = {k: fitted[k] for k in DEFAULT_WINDOW}
    plan["run_steps"] = int(steps)
    plan["clamped"] = bool(why)
    plan["clamp_reasons"] = why
    store.write_json_atomic(path, plan)


def window_for(scale: str, workload: str, matrix: dict[str, Any]) -> dict[str, Any]:
    """The window a matrix scale sets for a workload (DEFAULT_WINDOW where it sets none)."""
    block = (matrix["scales"].get(scale, {}).get("profiling") or {}).get(workload) or {}
    return check_window(block)


def write_plan(run_dir: Path, spec: dict[str, Any], window: dict[str, Any]) -> None:
    store.write_json_atomic(run_dir / PROFILING_PLAN, {"profiler": spec["profiler"], **window})


def capture_mode(window: dict[str, Any], capture_api: bool) -> str:
    if capture_api:
        return CAPTURE_API
    return CAPTURE_DURATION if window.get("max_seconds") else CAPTURE_WHOLE


def read_capture(run_dir: Path) -> str | None:
    """The nsys capture mode the launch recorded; None for a run started by hand."""
    path = run_dir / PROFILING_PLAN
    return store.read_json(path).get(NSYS_CAPTURE_KEY) if path.is_file() else None


def read_window(run_dir: Path | None) -> dict[str, Any]:
    """The window the sweep planned for this run (DEFAULT_WINDOW for a run started by hand)."""
    path = run_dir / PROFILING_PLAN if run_dir is not None else None
    if path is None or not path.is_file():
        return dict(DEFAULT_WINDOW)
    plan = store.read_json(path)
    return check_window({k: v for k, v in plan.items() if k in DEFAULT_WINDOW})


# --- the launch: nsys around each rank ------------------------------------------------------------


def nsys_command(
    launcher: list[str],
    program: list[str],
    run_dir: Path,
    window: dict[str, Any],
    capture_api: bool,
) -> list[str]:
    """Put `nsys profile` around each rank's `program`; `launcher` is torchrun and its options,
    or [] for one process. Without `capture_api` (cudaProfilerApi start/stop, vision) the window is
    --duration=max_seconds from the start (0: the whole run)."""
    out = run_dir / NSYS_DIR / ("rank%q{RANK}" if launcher else "rank0")
    nsys = [
        "nsys",
        "profile",
        f"--trace={NSYS_TRACES}",
        "--sample=none",
        "--cpuctxsw=none",
        # nsys ends the application when a --duration window closes unless told not to
        "--kill=none",
        "--force-overwrite=true",
        f"--output={out}",
    ]
    mode = capture_mode(window, capture_api)
    if mode == CAPTURE_API:
        nsys[5:5] = ["--capture-range=cudaProfilerApi", "--capture-range-end=stop"]
    elif mode == CAPTURE_DURATION:
        nsys.insert(5, f"--duration={int(math.ceil(window['max_seconds']))}")
    if launcher:
        return [*launcher, "--no-python", *nsys, *program]
    return [*nsys, *program]


def with_nsys(cmd: list[str], run_dir: Path, capture_api: bool) -> list[str]:
    """`nsys_command` for a finished launch command (torchrun's options stay the launcher)."""
    window = read_window(run_dir)
    plan = run_dir / PROFILING_PLAN  # the capture mode, where the sweep wrote a plan
    if plan.is_file():
        mode = capture_mode(window, capture_api)
        store.write_json_atomic(plan, {**store.read_json(plan), NSYS_CAPTURE_KEY: mode})
    for i, arg in enumerate(cmd):
        if arg.startswith("--nproc_per_node"):
            cut = i + 1 if "=" in arg else i + 2
            return nsys_command(
                cmd[:cut], [sys.executable, *cmd[cut:]], run_dir, window, capture_api
            )
    return nsys_command([], cmd, run_dir, window, capture_api)
