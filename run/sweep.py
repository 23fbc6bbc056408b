"""Run every missing run of one or more experiments; resumable and failure-tolerant.

    python -m run.sweep --profile smoke --exp V3 [--exp V4 ...] [--retry-failed]

For each run spec of the experiments: a finished run (its summary.json exists) is skipped; a run
that needs more GPUs (or, on CPU, more cores for gloo ranks) than the machine has is skipped and
listed as such; everything else is launched, its output captured in the run's log.txt. A run that
fails or runs out of memory is stored with that status and the sweep goes on. When every run of an
experiment has been dealt with, results/<profile>/sweeps/<EXP>.json records the outcome; that file
is what the Makefile waits for.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from run import matrix as mx
from run import probe as hw
from run import profiling, provenance, store

# How long one run may take before it is stopped and recorded as failed (seconds; 0 = no limit).
RUN_TIMEOUT_S = int(os.environ.get("RUN_TIMEOUT_S", "0"))
OOM_PATTERNS = ("CUDA out of memory", "OutOfMemoryError", "CUBLAS_STATUS_ALLOC_FAILED")


def resolve_profiler(spec: dict[str, Any], override: str | None, info: dict[str, Any]) -> dict:
    """PROFILER from the environment overrides the matrix; `auto` picks nsys when installed."""
    spec = dict(spec)
    choice = override or spec.get("profiler", "none")
    if choice == "auto":
        choice = "nsys" if info.get("nsys") else "torch"
    if choice == "nsys" and not info.get("nsys"):
        raise mx.MatrixError("PROFILER=nsys but nsys is not on the PATH (try PROFILER=torch)")
    spec["profiler"] = choice
    return spec


def last_error_line(log: Path) -> str:
    """The line that says why a run failed: the last exception line of its log."""
    if not log.is_file():
        return "no log written"
    lines = log.read_text(errors="replace").splitlines()
    for line in reversed(lines):
        if re.match(r"^\s*(\[rank\d+\]:\s*)?[\w.]+(Error|Exception|Interrupt)\b.*", line):
            return line.strip()[:500]
    tail = [ln.strip() for ln in lines if ln.strip()]
    return tail[-1][:500] if tail else "no output"


def launch_command(spec: dict[str, Any], stage: Path, info: dict[str, Any]) -> list[str]:
    return mx.WORKLOADS[spec["workload"]].launch_command(spec, stage, info)


def profile_metrics(spec: dict[str, Any], stage: Path, summary: dict[str, Any]) -> dict[str, Any]:
    """A profiled run that finished: its traces -> RUN/profile_metrics.csv before publishing.

    A trace that cannot be read makes the run `failed` with the reader's one-line error.
    """
    from analysis.profiles import ProfileError

    if summary.get("status") != "ok" or spec.get("profiler") not in ("torch", "nsys"):
        return summary
    t0 = time.monotonic()
    try:
        out = profiling.collect_metrics(mx.run_name(spec), stage, spec["profiler"])
    except ProfileError as exc:
        return {**summary, "status": "failed", "error": f"profile: {exc}"}
    summary = {**summary, "profile_metrics": out.name}
    summary["profile_parse_s"] = round(time.monotonic() - t0, 3)
    return summary


def execute(
    spec: dict[str, Any],
    profile: str,
    info: dict[str, Any],
    matrix: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run one spec into its staging folder and publish it. Returns its summary."""
    name = mx.run_name(spec)
    stage = store.start_staging(profile, name)
    store.write_json_atomic(stage / store.SPEC, spec)
    if spec.get("profiler", "none") != "none":
        window = profiling.window_for(profile, spec["workload"], matrix or mx.load_matrix())
        profiling.write_plan(stage, spec, window)
    mod = mx.WORKLOADS[spec["workload"]]
    reason = getattr(mod, "unsupported_reason", lambda s: None)(spec)
    if reason:
        cmd: list[str] = []
        summary = {"status": "unsupported", "error": reason, "name": name}
    else:
        cmd = launch_command(spec, stage, info)
    store.write_json_atomic(stage / store.PROVENANCE, provenance.collect(spec, cmd, info))
    if cmd:
        print(f"[sweep] {name}\n        $ {shlex.join(cmd)}", flush=True)
        t0 = time.monotonic()
        with open(stage / store.LOG, "w") as log:
            log.write(f"$ {shlex.join(cmd)}\n")
            log.flush()
            try:
                proc = subprocess.run(
                    cmd,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    timeout=RUN_TIMEOUT_S or None,
                    check=False,
                )
                rc: int | None = proc.returncode
            except subprocess.TimeoutExpired:
                rc = None
        wall = time.monotonic() - t0
        if (stage / store.SUMMARY).is_file():
            summary = store.read_json(stage / store.SUMMARY)
        else:
            text = (stage / store.LOG).read_text(errors="replace")
            oom = any(p in text for p in OOM_PATTERNS)
            error = (
                f"timed out after {RUN_TIMEOUT_S} s"
                if rc is None
                else last_error_line(stage / store.LOG)
            )
            summary = {
                "name": name,
                "status": "oom" if oom else "failed",
                "error": error,
                "returncode": rc,
                "total_time_s": None,
            }
        summary["launch_wall_s"] = round(wall, 3)
        summary = profile_metrics(spec, stage, summary)
        store.write_json_atomic(stage / store.SUMMARY, summary)
        status = summary["status"]
        extra = f": {summary.get('error')}" if status != "ok" else ""
        print(f"        -> {status} in {wall:.1f} s{extra}", flush=True)
    else:
        store.write_json_atomic(stage / store.SUMMARY, summary)
        print(f"[sweep] {name}: unsupported ({reason})", flush=True)
    store.publish(stage, profile, name)
    return summary


def sweep(exp_ids: list[str], profile: str, retry_failed: bool = False) -> int:
    info = hw.probe()
    limit = hw.max_ranks(info)
    override = os.environ.get("PROFILER") or None
    if override and override not in ("none", "auto", "torch", "nsys"):
        raise mx.MatrixError(f"unknown PROFILER '{override}' (none, auto, torch, nsys)")
    matrix = mx.load_matrix()
    expanded = [mx.expand(e, profile, matrix) for e in exp_ids]
    # The profiler choice is resolved for every spec before anything runs, so PROFILER=nsys
    # without nsys stops here with one line, not halfway through a sweep.
    resolved = {
        exp.id: [resolve_profiler(s, override, info) for s in exp.specs] for exp in expanded
    }
    # Data sets are checked (or made) before anything runs: a missing one stops the sweep at once
    # instead of leaving a failed run per cell.
    for workload, mod in mx.WORKLOADS.items():
        specs = [s for exp in expanded for s in exp.specs if s["workload"] == workload]
        if specs and hasattr(mod, "preflight"):
            mod.preflight([s for s in specs if s["gpus"] <= limit])
    for exp in expanded:
        record: dict[str, Any] = {"experiment": exp.id, "target": exp.target, "profile": profile}
        ran, skipped = [], []
        for spec in resolved[exp.id]:
            name = mx.run_name(spec)
            if spec["gpus"] > limit:
                unit = "GPU(s)" if info["gpu_count"] else "CPU core(s) for gloo ranks"
                why = f"needs {spec['gpus']} ranks, this machine has {limit} {unit}"
                skipped.append({"run": name, "gpus": spec["gpus"], "reason": why})
                print(f"[sweep] {name}: skipped ({why})", flush=True)
                continue
            if store.is_finished(profile, name):
                status = store.read_json(store.run_dir(profile, name) / store.SUMMARY)["status"]
                if not (retry_failed and status == "failed"):
                    ran.append({"run": name, "status": status, "reused": True})
                    continue
            summary = execute(spec, profile, info, matrix)
            ran.append({"run": name, "status": summary["status"], "reused": False})
        record["runs"] = ran
        record["skipped"] = skipped
        record["hardware"] = {k: info[k] for k in ("gpu_count", "gpu_model", "cpu_count", "nsys")}
        store.write_json_atomic(store.sweeps_dir(profile) / f"{exp.id}.json", record)
        done = sum(1 for r in ran if not r["reused"])
        print(
            f"[sweep] {exp.id}: {len(ran)} runs ({done} new, {len(ran) - done} reused), "
            f"{len(skipped)} skipped",
            flush=True,
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--profile", required=True)
    ap.add_argument("--exp", action="append", required=True, help="experiment id, e.g. V3")
    ap.add_argument("--retry-failed", action="store_true", help="run failed runs again")
    args = ap.parse_args(argv)
    try:
        return sweep(args.exp, args.profile, args.retry_failed)
    except (mx.MatrixError, profiling.ProfilingError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
