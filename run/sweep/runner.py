"""Run every missing run of one or more experiments; resumable and failure-tolerant.

    python -m run.sweep --scale smoke --exp V3 [--exp V4 ...] [--retry-failed]

A finished run (its summary.json exists) is reused; README ("How a run works") says what is
skipped, how a failure is recorded and what a sweep prints. results/<scale>/sweeps/<EXP>.json
records each experiment's outcome (what the Makefile waits for). `--only-repeat k` runs repeat k
alone, no record: the Makefile spreads the noise repeats over `make all`; a run beside a busy core
(run/node/busy.py) runs only in the whole sweep. Sweeps sharing a results folder take each run
under a lock (run/sweep/lock.py): a run another sweep holds is waited for after this sweep's own
runs, and run here if that sweep died. Bad input is one line `error: ...`, exit 2, before any run.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from run import settings, store
from run.errors import UserError, unwind_on_signals
from run.node import bundle, busy, lifeline, numa, profiling, provenance
from run.node import probe as hw
from run.program import program
from run.sweep import left, lock
from run.sweep import matrix as mx
from run.sweep.failure import root_cause
from run.sweep.progress import Progress, hms
from run.sweep.workloads import WORKLOADS

OOM_PATTERNS = ("CUDA out of memory", "OutOfMemoryError", "CUBLAS_STATUS_ALLOC_FAILED")


def run_logged(
    cmd: list[str], log_path: Path, progress: Progress | None, name: str, tag: str
) -> tuple[int | None, float]:
    """(return code, None when RUN_TIMEOUT_S stopped it; wall seconds) of `cmd`, its output
    appended to `log_path`. Every process it starts carries the attempt's tag and dies with its
    parent (run/node/lifeline.py); whatever is left when it ends is stopped here."""
    timeout, heartbeat = settings.value("RUN_TIMEOUT_S"), settings.value("HEARTBEAT_S")
    t0 = time.monotonic()
    env = {**os.environ, lifeline.ATTEMPT_ENV: tag}
    with open(log_path, "a") as log:
        proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, env=env, preexec_fn=lifeline.tie_to_parent
        )
        try:
            while True:
                elapsed = time.monotonic() - t0
                wait = min(heartbeat, max(timeout - elapsed, 0.01)) if timeout else heartbeat
                try:
                    rc: int | None = proc.wait(timeout=wait)
                    break
                except subprocess.TimeoutExpired:
                    elapsed = time.monotonic() - t0
                    if timeout and elapsed >= timeout:
                        rc = None
                        break
                    if progress is not None:
                        print(progress.heartbeat(name, elapsed, log_path), flush=True)
        finally:
            # On a timeout, Ctrl-C, SIGTERM or a finished command alike: nothing of it stays.
            with lifeline.shielded():
                lifeline.stop(tag)
                if proc.poll() is None:
                    proc.kill()
                proc.wait()
    return rc, time.monotonic() - t0


def profile_metrics(spec: dict[str, Any], stage: Path, summary: dict[str, Any]) -> dict[str, Any]:
    """A finished profiled run's traces -> RUN/profile_metrics.csv, by analysis/'s reader run as a
    program (run/ imports no analysis/); an unreadable trace fails the run with its one line."""
    if summary.get("status") != "ok" or spec.get("profiler") not in ("torch", "nsys"):
        return summary
    t0 = time.monotonic()
    cmd = [sys.executable, "-m", "analysis.profiles.collect", str(stage.resolve())]
    cmd += ["--run", mx.run_name(spec), "--profiler", spec["profiler"]]
    proc = subprocess.run(cmd, cwd=store.REPO, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        why = lines[-1].removeprefix("error: ") if lines else f"exit status {proc.returncode}"
        return {**summary, "status": "failed", "error": f"profile: {why}"}
    summary = {**summary, "profile_metrics": Path(proc.stdout.strip()).name}
    summary["profile_parse_s"] = round(time.monotonic() - t0, 3)
    return summary


def execute(
    spec: dict[str, Any],
    scale: str,
    info: dict[str, Any],
    matrix: dict[str, Any],
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Run one spec into this attempt's own staging folder and publish it (the caller holds the
    run's lock); interrupted, it leaves no process, no staging folder and nothing published."""
    name = mx.run_name(spec)
    run = store.run_dir(scale, name)
    lifeline.stop_earlier(run)
    store.discard_staging(scale, name)
    tag = lifeline.new_attempt(run)
    stage = store.start_staging(scale, name, lifeline.attempt_id(tag))
    try:
        summary = _run_in(stage, tag, spec, scale, info, matrix, progress)
        store.publish(stage, scale, name)
    except BaseException:
        with lifeline.shielded():
            lifeline.stop(tag)
            shutil.rmtree(stage, ignore_errors=True)
        raise
    return summary


def _run_in(
    stage: Path,
    tag: str,
    spec: dict[str, Any],
    scale: str,
    info: dict[str, Any],
    matrix: dict[str, Any],
    progress: Progress | None,
) -> dict[str, Any]:
    name = mx.run_name(spec)
    store.write_json_atomic(stage / store.SPEC, spec)
    if spec.get("profiler", "none") != "none":
        window = profiling.window_for(scale, spec["workload"], matrix)
        profiling.write_plan(stage, spec, window)
    reason = WORKLOADS[spec["workload"]].unsupported_reason(spec)
    cmd = [] if reason else WORKLOADS[spec["workload"]].launch_command(spec, stage, info)
    prov = provenance.collect(spec, cmd, info)
    # the load the sweep puts beside the run (run/node/busy.py): busy_cores 0 for a plain run
    burners, prov["beside"] = busy.sized(spec, info, runs=bool(cmd))
    store.write_json_atomic(stage / store.PROVENANCE, prov)
    if not cmd:
        summary = {"status": "unsupported", "error": reason, "name": name}
        store.write_json_atomic(stage / store.SUMMARY, summary)
        if progress:
            progress.start(name)
            progress.finish(name)
        print(f"[sweep] {name}: unsupported ({reason})", flush=True)
        return summary
    head = progress.start(name) if progress else f"[sweep] {name}"
    line = f"$ {shlex.join(cmd)}  {numa.note(prov['numa'])}{busy.note(spec, burners)}"
    print(f"{head}\n        {line}".replace("\n#", "\n        #"), flush=True)
    store.write_text_atomic(stage / store.LOG, f"{line}\n")
    with busy.beside(burners, {**os.environ, lifeline.ATTEMPT_ENV: tag}):
        rc, wall = run_logged(cmd, stage / store.LOG, progress, name, tag)
    if progress:
        progress.finish(name)
    summary = store.read_summary(stage) or {}
    if not summary or store.is_unreadable(summary):
        text = (stage / store.LOG).read_text(errors="replace")
        oom = any(p in text for p in OOM_PATTERNS)
        timeout = settings.value("RUN_TIMEOUT_S")
        error = f"timed out after {timeout} s" if rc is None else root_cause(text, rc)
        summary = {"name": name, "status": "oom" if oom else "failed", "error": error,
                   "returncode": rc, "total_time_s": None}  # fmt: skip
    summary["launch_wall_s"] = round(wall, 3)
    summary = profile_metrics(spec, stage, summary)
    store.write_json_atomic(stage / store.SUMMARY, summary)
    status = summary["status"]
    extra = f": {summary.get('error')}" if status != "ok" else ""
    print(f"        -> {status} in {hms(wall)}{extra}", flush=True)
    return summary


def attempt(
    spec: dict[str, Any],
    scale: str,
    info: dict[str, Any],
    matrix: dict[str, Any],
    progress: Progress | None,
    retry_failed: bool,
) -> dict[str, Any] | None:
    """The run's entry in the sweep record: reused, or run under its lock; None if another
    sweep holds the lock (run/sweep/lock.py)."""
    name = mx.run_name(spec)
    summary = store.read_summary(store.run_dir(scale, name))
    if not _wanted(summary, retry_failed):
        return {"run": name, "status": summary["status"], "reused": True}
    held = lock.acquire(scale, name)
    if held is None:
        return None
    with held:
        summary = store.read_summary(store.run_dir(scale, name))
        if not _wanted(summary, retry_failed):  # finished by another sweep meanwhile
            return {"run": name, "status": summary["status"], "reused": True}
        if store.is_unreadable(summary):
            print(f"[sweep] {name}: {summary['error']}: running it again", flush=True)
        summary = execute(spec, scale, info, matrix, progress)
    return {"run": name, "status": summary["status"], "reused": False}


def _wanted(summary: dict[str, Any] | None, retry_failed: bool) -> bool:
    """Whether a run (its read_summary) is to be run: not finished, unreadable, or failed and
    retried."""
    if summary is None or store.is_unreadable(summary):
        return True
    return retry_failed and summary["status"] == "failed"


def check_device(scale: str, info: dict[str, Any], matrix: dict[str, Any]) -> None:
    """A GPU scale never trains on a CPU; GPUs that torch cannot use stop every scale."""
    hw.check_cuda(info)
    if mx.scale_device(scale, matrix) == "gpu" and not info["gpu_count"]:
        hidden = info.get("gpus_on_node", 0)
        why = (
            f"the node has {hidden} GPU(s) but CUDA_VISIBLE_DEVICES / SLURM hides them all"
            if hidden
            else "this machine has none (nvidia-smi lists no GPU)"
        )
        raise UserError(
            f"scale '{scale}' runs on CUDA GPUs and {why}: use PROFILE=smoke on a CPU "
            "machine, or run on a GPU node"
        )


def repeat_index(specs: tuple[dict[str, Any], ...] | list[dict[str, Any]]) -> list[int]:
    """Each spec's repeat number within its cell (specs equal but for the seed), by seed."""
    cells: dict[str, list[int]] = {}
    keys = []
    for spec in specs:
        key = repr(sorted((k, repr(v)) for k, v in spec.items() if k != "seed"))
        keys.append(key)
        cells.setdefault(key, []).append(int(spec.get("seed", 0)))
    return [sorted(cells[k]).index(int(s.get("seed", 0))) for k, s in zip(keys, specs, strict=True)]


def sweep(
    exp_ids: list[str], scale: str, retry_failed: bool = False, only_repeat: int | None = None
) -> int:
    """Every missing run of the experiments, then each one's record. `only_repeat` k: only repeat
    k of each cell and no record (the noise repeats spread over `make all`, analysis/noise.py)."""
    info = hw.probe()
    limit = hw.max_ranks(info)
    override = mx.profiler_override()
    matrix = mx.load_matrix()
    expanded = [mx.expand(e, scale, matrix) for e in exp_ids]
    if only_repeat is not None:  # never a run beside a busy core: those run with the whole sweep
        expanded = [
            dataclasses.replace(exp, specs=tuple(
                s for s, k in zip(exp.specs, repeat_index(exp.specs), strict=True)
                if k == only_repeat and not busy.is_busy(s)))
            for exp in expanded
        ]  # fmt: skip
    numa.plan(1, info)  # NUMA=bind without numactl, or a bad NUMA value: stop before any run
    check_device(scale, info, matrix)
    # The profiler choice is resolved for every spec before anything runs, so PROFILER=nsys
    # without nsys stops here with one line, not halfway through a sweep.
    resolved = {
        exp.id: [mx.resolve_profiler(s, override, info) for s in exp.specs] for exp in expanded
    }
    # Data sets are checked (or made) before anything runs: a missing one stops the sweep at once
    # instead of leaving a failed run per cell.
    for name, workload in WORKLOADS.items():
        specs = [s for exp in expanded for s in exp.specs if s["workload"] == name]
        if specs:
            workload.preflight([s for s in specs if s["gpus"] <= limit])
    progress = Progress(scale, info, matrix)
    # First every experiment's own runs, then the runs other sweeps held: nodes sharing the
    # results folder wait only once, at the end, not at the tail of every experiment.
    ran: dict[str, list[dict[str, Any]]] = {exp.id: [] for exp in expanded}
    skipped: dict[str, list[dict[str, Any]]] = {exp.id: [] for exp in expanded}
    taken: list[tuple[str, dict[str, Any]]] = []
    for exp in expanded:
        for spec in resolved[exp.id]:
            name = mx.run_name(spec)
            why = left.skip_reason(scale, spec, info, limit)  # the plan's `skipped` too
            if why:
                skipped[exp.id].append({"run": name, "gpus": spec["gpus"], "reason": why})
                print(f"[sweep] {name}: skipped ({why})", flush=True)
                continue
            got = attempt(spec, scale, info, matrix, progress, retry_failed)
            if got is None:
                who = lock.describe(lock.lock_path(scale, name))
                print(f"[sweep] {name}: taken by {who}; waiting for it later", flush=True)
                taken.append((exp.id, spec))
            else:
                ran[exp.id].append(got)
    # A run another sweep had taken: its result once published, or run here if that sweep died
    # (its lock goes stale). A run retried by the other sweep is not retried again.
    for exp_id, spec in taken:
        while (got := attempt(spec, scale, info, matrix, progress, retry_failed=False)) is None:
            time.sleep(settings.value("LOCK_POLL_S"))
        ran[exp_id].append(got)
    if only_repeat is not None:  # a part: the whole sweep writes the record, reusing these runs
        done = sum(1 for e in expanded for r in ran[e.id] if not r["reused"])
        print(
            f"[sweep] repeat {only_repeat} of {', '.join(exp_ids)}: {done} new run(s)", flush=True
        )
        return 0
    for exp in expanded:
        record: dict[str, Any] = {
            "experiment": exp.id,
            "target": exp.target,
            "scale": scale,
            "repeats": exp.repeats,
            "runs": ran[exp.id],
            "skipped": skipped[exp.id],
            "hardware": {k: info[k] for k in ("gpu_count", "gpu_model", "cpu_count", "nsys")},
        }
        store.write_json_atomic(store.sweep_file(scale, exp.id), record)
        done = sum(1 for r in ran[exp.id] if not r["reused"])
        print(
            f"[sweep] {exp.id}: {len(ran[exp.id])} runs ({done} new, "
            f"{len(ran[exp.id]) - done} reused), {len(skipped[exp.id])} skipped",
            flush=True,
        )
    failed = [r for exp in expanded for r in ran[exp.id] if r["status"] == "failed"]
    if failed and mx.scale_device(scale, matrix) == "gpu":
        send_back(scale, exp_ids, info, failed)
    return 0


def send_back(
    scale: str, exp_ids: list[str], info: dict[str, Any], failed: list[dict[str, Any]]
) -> Path | None:
    """A GPU sweep's failed runs in one archive (run/node/bundle.py), named after the experiments
    so that sweeps sharing the results folder do not overwrite each other's."""
    runs = [
        {"name": r["run"], "scale": scale, "run": r["run"], "status": r["status"],
         "root_cause": store.read_json(store.run_dir(scale, r["run"]) / store.SUMMARY).get("error")}
        for r in failed
    ]  # fmt: skip
    path = store.scale_dir(scale) / "bundles" / f"{'-'.join(sorted(set(exp_ids)))}.tar.gz"
    try:
        bundle.build(path, info, runs)
    except OSError as exc:  # the runs are recorded already; a missing bundle must not hide them
        print(f"[sweep] no bundle written ({exc})", flush=True)
        return None
    print(
        f"[sweep] {len(failed)} run(s) failed: attach {path} to a report (README: 'Checking a "
        "GPU node')",
        flush=True,
    )
    return path


@program("nothing half-written is left; the same command resumes")
def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m run.sweep",
        description=__doc__,
        formatter_class=argparse.RawTextHelpFormatter,
    )
    ap.add_argument("--scale", required=True)
    ap.add_argument("--exp", action="append", required=True, help="experiment id, e.g. V3")
    ap.add_argument("--retry-failed", action="store_true", help="run failed runs again")
    ap.add_argument("--only-repeat", type=int, metavar="K",
                    help="only repeat K (seed + K) of each cell, and write no sweep record")  # fmt: skip
    args = ap.parse_args(argv)
    # Preflight imports torchtune, whose torchao prints a notice about its C++ extensions; the
    # runs' own logs keep it, the sweep's one-line errors should not be buried under it.
    logging.getLogger("torchao").setLevel(logging.ERROR)
    # SIGTERM (SLURM's requeue, a killed make) unwinds like Ctrl-C: the run in flight is stopped
    # with all its processes, its staging folder removed and its lock released at once.
    unwind_on_signals()
    return sweep(args.exp, args.scale, args.retry_failed, args.only_repeat)
