"""A finished run's traces -> RUN/profile_metrics.csv and RUN/profile_breakdown.csv; the sweep
runs it after every profiled run, before publishing the run folder:

    python -m analysis.profiles.collect RUN_DIR --run NAME --profiler torch|nsys

It lives here so that run/ imports nothing of analysis/. Exit status: 0 the CSV was written (its
path on stdout); 1 a trace is missing or unreadable (one line on stderr, no CSV written,
profiling.json as it was); 2 usage.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

from run import store
from run.node import profiling
from run.program import program

from . import ProfileError, load
from . import breakdown as bdown
from .metrics import COLUMNS, WALL_COLUMNS, profile_rows, sort_rows, write_rows_atomic


def export_nsys(report: Path, nsys: str = "nsys") -> Path:
    """`nsys export --type sqlite` of one report; returns the .sqlite path."""
    out = report.with_suffix(".sqlite")
    cmd = [nsys, "export", "--type=sqlite", "--force-overwrite=true", f"--output={out}"]
    try:
        proc = subprocess.run([*cmd, str(report)], capture_output=True, text=True, check=False)
    except OSError as exc:
        raise ProfileError(report, f"cannot run nsys export ({exc.strerror or exc})") from exc
    if proc.returncode != 0 or not out.is_file():
        why = (proc.stderr or proc.stdout).strip().splitlines()
        raise ProfileError(report, f"nsys export failed: {why[-1] if why else proc.returncode}")
    return out


def trace_files(run_dir: Path, profiler: str) -> list[Path]:
    """The per-rank profile files of a finished run (nsys reports exported first)."""
    if profiler == "nsys":
        reports = sorted((run_dir / profiling.NSYS_DIR).glob("*.nsys-rep"))
        if reports and shutil.which("nsys"):
            return [export_nsys(r) for r in reports]
        return sorted((run_dir / profiling.NSYS_DIR).glob("*.sqlite"))
    return sorted((run_dir / profiling.TORCH_TRACE_DIR).rglob(profiling.TORCH_TRACE_GLOB))


def collect_metrics(run: str, run_dir: Path, profiler: str) -> Path:
    """Turn a run's traces into RUN/profile_metrics.csv; ProfileError (one line) on bad input.

    nsys shares divide by the wall the run's capture mode calls for (nsys_sqlite.with_capture);
    the CSV's wall_s/wall_from and profiling.json's profile_wall say which span each rank used.
    Every file is read before anything is written (a bad one leaves no CSV)."""
    files = trace_files(run_dir, profiler)
    where = run_dir / (profiling.NSYS_DIR if profiler == "nsys" else profiling.TORCH_TRACE_DIR)
    if not files:
        raise ProfileError(
            where,
            f"no {profiler} profile was written (the run ended before the window closed, or "
            "its recipe ignores the profiler block: torchtune 0.6.1's lora_dpo_distributed does)",
        )
    capture = profiling.read_capture(run_dir) if profiler == "nsys" else None
    # One reading per file gives the metrics and the breakdown (diff and fig-optimized read it);
    # the breakdown's window follows the wall the run's capture mode picks.
    both = load(files, capture=capture)
    profiles = [(rank, p) for rank, p, *_ in both]
    rows = sort_rows(row for rank, p in profiles for row in profile_rows(run, rank, p))
    splits = [row for r, _, b, _ in both for row in bdown.breakdown_rows(run, r, b)]
    out = write_rows_atomic(run_dir / profiling.PROFILE_METRICS, COLUMNS + WALL_COLUMNS, rows)
    write_rows_atomic(bdown.breakdown_path(out), bdown.COLUMNS, splits)
    plan_path = run_dir / profiling.PROFILING_PLAN
    if plan_path.is_file():
        walls = {str(r): {"wall_s": p.wall_s, "wall_from": p.wall_from} for r, p in profiles}
        wall = {"capture": capture, "ranks": walls} if profiler == "nsys" else {"ranks": walls}
        key = profiling.PROFILE_WALL_KEY
        store.write_json_atomic(plan_path, {**store.read_json(plan_path), key: wall})
    return out


@program()
def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m analysis.profiles.collect",
        description="Turn a finished run's traces into RUN_DIR/profile_metrics.csv.",
    )
    parser.add_argument("run_dir", type=Path, help="the run's (staging) folder")
    parser.add_argument("--run", required=True, help="run name written in the `run` column")
    parser.add_argument("--profiler", required=True, choices=("torch", "nsys"))
    args = parser.parse_args(argv)
    try:
        print(collect_metrics(args.run, args.run_dir, args.profiler))
    except ProfileError as exc:  # the reader's own error: the installed reader has no run.errors
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
