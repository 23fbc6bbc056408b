"""Turn profiles made elsewhere into the tidy metrics CSV and say where the time went."""

from __future__ import annotations

import argparse
import sys
import textwrap
from collections.abc import Sequence

import pandas as pd

from run import settings

from . import breakdown as bdown
from . import coverage as cov
from . import load_with_breakdown
from .kineto_kinds import HIP, HIP_METRICS
from .metrics import (
    COLUMNS,
    COPY_METRICS,
    CPU_PREFIX,
    KERNEL_LAUNCH_ALL,
    LAUNCH_METRICS,
    METRICS,
    ProfileError,
    RankProfile,
    add_launch_all,
    by_metric,
    concat_frames,
    profile_frame,
    write_csv_atomic,
)

_EPILOG = f"""\
input files (one per rank; the kind is detected from the content):
  nsys      SQLite from `nsys export --type sqlite report.nsys-rep`
  torch     torch.profiler Chrome trace, *.pt.trace.json or *.pt.trace.json.gz
rank of each file: the rank recorded in a torch trace (distributedInfo), else "rankN" in the
file or folder name (rank0.sqlite, rank_1/trace.json), else the order on the command line.

output CSV columns: {", ".join(COLUMNS)}
  metric   normalised name, one of the paper's:
{textwrap.fill(", ".join(METRICS), 96, initial_indent=" " * 11, subsequent_indent=" " * 11)}
           or another kernel-launch API:
{textwrap.fill(", ".join(LAUNCH_METRICS), 96, initial_indent=" " * 11, subsequent_indent=" " * 11)}
           torch traces also give "{CPU_PREFIX}<op>" rows unless --no-cpu-ops: the op's calls and
           the wall time inside it (its calls' union, nested and cross-thread calls once)
  share    total_s / profiled wall time of that rank (summed durations of concurrent calls can
           exceed it); bytes only on memcpy rows.
  A metric absent from a profile has no row. The summary adds {KERNEL_LAUNCH_ALL} (launches
  through every API) and says per rank what is absent: not recorded by the profiler, not called
  (a profile with CUDA activity: 0), or not measured (no CUDA in the profile).

time breakdown (interval unions per rank and device, one definition for both sources; see
analysis/profiles/breakdown.py): written beside the metrics CSV (metrics.csv ->
metrics.breakdown.csv, profile_metrics.csv -> profile_breakdown.csv) unless --breakdown-out
names another file. Columns: {", ".join(bdown.COLUMNS)}
  quantity {", ".join(bdown.QUANTITIES)}
           over the rank's window: the wall its share column divides by (wall_s, wall_from: an
           nsys capture range's CUDA activity, the nsys session, or the torch trace's span), so
           idle = window - busy; the summary also gives the CUDA activity span. Device
           "{bdown.HOST}" holds host_blocked, the union of the rank's host time inside these calls:
{textwrap.fill(", ".join(sorted(bdown.BLOCKING_CALLS)), 96, initial_indent=" " * 11, subsequent_indent=" " * 11)}

exit status: 0 written; 1 a file could not be read (one line on stderr, no CSV written); 2 usage.

example:
  python -m analysis.profiles.cli --run llm-fsdp --out metrics.csv rank0.sqlite rank1.sqlite

before and after (see `python -m analysis.profiles.cli diff --help`):
  python -m analysis.profiles.cli diff before/ after/ --fail-if 5
"""


def at_least_one(text: str) -> int:
    """An argparse type: a whole number >= 1 (argparse turns the refusal into its one error)."""
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text!r}")
    return n


def build_parser() -> argparse.ArgumentParser:
    """The CLI's argument parser (kept separate so tests and docs can inspect it)."""
    parser = argparse.ArgumentParser(
        prog="python -m analysis.profiles.cli",
        description="Read nsys SQLite exports and/or torch.profiler traces of one run (one file "
        "per rank), write the tidy metrics CSV, and print a summary of where the time went.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help="profile file, one per rank")
    parser.add_argument("--run", required=True, help="run name written in the `run` column")
    parser.add_argument("--out", required=True, help="metrics CSV to write (atomically)")
    parser.add_argument(
        "--breakdown-out",
        help="time-breakdown CSV to write (default: beside --out, see below)",
    )
    parser.add_argument(
        "--top", type=at_least_one, default=8, help="CPU ops per rank in the summary (default 8)"
    )
    parser.add_argument(
        "--no-cpu-ops", action="store_true", help='leave out the "cpu:<op>" rows of torch traces'
    )
    return parser


def summary(df: pd.DataFrame, profiles: Sequence[tuple[int, RankProfile]], top: int) -> str:
    """Short text per rank: wall time, the paper's and launch metrics, top CPU ops, absences."""
    grouped = add_launch_all(by_metric(df))
    shown = [*METRICS, *LAUNCH_METRICS, *COPY_METRICS, KERNEL_LAUNCH_ALL]
    lines = []
    for rank, prof in sorted(profiles, key=lambda rp: (rp[0], rp[1].source)):
        # The activity span beside the wall: a share of a session much wider than it is small.
        act = "n/a" if pd.isna(prof.activity_s) else f"{prof.activity_s:.3f} s"
        hip = prof.device_kind == HIP  # a ROCm build's trace: labelled so, never CUDA
        lines.append(
            f"rank {rank} [{prof.source}{', ' + HIP if hip else ''}] {prof.path}: wall"
            f" {prof.wall_s:.3f} s ({prof.wall_from}), {'HIP' if hip else 'CUDA'} activity {act}"
        )
        mine = grouped[(grouped["rank"] == rank) & (grouped["source"] == prof.source)]
        mine = mine.sort_values("total_s", ascending=False, kind="mergesort")
        paper = mine[mine["metric"].isin([*shown, *HIP_METRICS])]
        cpu = mine[mine["metric"].str.startswith(CPU_PREFIX)].head(top)
        for _, row in pd.concat([paper, cpu]).iterrows():
            name = row["metric"] if len(row["metric"]) <= 40 else row["metric"][:37] + "..."
            extra = "" if pd.isna(row["bytes"]) else f"  {row['bytes'] / 1e6:.1f} MB"
            lines.append(
                f"  {name:<40} {row['total_s']:10.4g} s {row['share']:8.2%}"
                f" {row['calls']:>9} calls{extra}"
            )
        lines += _absent_lines(mine, prof.source, hip)
    return "\n".join(lines)


def _absent_lines(mine: pd.DataFrame, source: str, hip: bool = False) -> list[str]:
    """The paper's metrics this rank's profile lacks, grouped by what the absence means.

    The CLI does not know the run's device: a profile with CUDA rows came from a GPU, so an
    absent metric there was not called (0); a profile without any is "not measured". A HIP/ROCm
    profile has no CUDA calls at all: its HIP calls are metrics of their own.
    """
    absent = [m for m in METRICS if m not in set(mine["metric"])]
    lines = []
    if hip:
        cuda = [m for m in absent if m.startswith("cuda")]
        absent = [m for m in absent if m not in cuda]
        lines.append(f"  not applicable to a {HIP} profile (its hip* calls): {', '.join(cuda)}")
    if not absent:
        return lines
    if not cov.has_cuda_rows(mine):
        return [*lines, f"  not measured (no CUDA in this profile): {', '.join(absent)}"]
    blind = [m for m in absent if m in cov.unrecordable([source])]
    rest = [m for m in absent if m not in blind]
    lines += [f"  {cov.not_recorded(source)}: {', '.join(blind)}"] if blind else []
    if rest:
        lines.append(f"  not called (0): {', '.join(rest)}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status. `diff A B ...` runs analysis.profiles.diff."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["diff"]:
        # imported here so the plain CLI does not load the diff module (nor the reverse import)
        from . import diff

        return diff.main(argv[1:])
    args = build_parser().parse_args(argv)
    if not settings.check_all_or_say():
        return 2
    try:
        # Every file read once, metrics and breakdown together, before anything is written, so
        # that a file failing leaves no CSV.
        both = load_with_breakdown(args.files, cpu_ops=not args.no_cpu_ops)
    except ProfileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    profiles = [(rank, prof) for rank, prof, _ in both]
    splits = [(rank, split) for rank, _, split in both]
    df = concat_frames(profile_frame(args.run, rank, prof) for rank, prof in profiles)
    split_out = args.breakdown_out or bdown.breakdown_path(args.out)
    split_df = pd.concat([bdown.breakdown_frame(args.run, r, b) for r, b in splits])
    for table, dest in ((df, args.out), (split_df, split_out)):
        try:
            write_csv_atomic(table, dest)
        except OSError as exc:
            print(f"error: {dest}: cannot write ({exc.strerror or exc})", file=sys.stderr)
            return 1
    print(summary(df, profiles, args.top))
    for rank, split in sorted(splits, key=lambda rb: (rb[0], rb[1].source)):
        print("\n".join(bdown.breakdown_lines(rank, split)))
    print(f"wrote {len(df)} rows to {args.out}, {len(split_df)} to {split_out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
