"""The profile reader's command line (`profread`, installed by `pip install .`; `python -m
analysis.profiles.cli` is the same program): summary, breakdown, diff. The command-less form,
`--run NAME --out F.csv FILE...`, is the summary writing both CSVs (the Makefile and hooks call
it so). Reading imports no pandas.
"""

from __future__ import annotations

import argparse
import math
import sys
import textwrap
from collections.abc import Iterable, Sequence
from pathlib import Path

from . import breakdown as bdown
from . import coverage as cov
from . import load, run_names, steps
from . import metrics as mt
from .kineto_fold import HIP, HIP_METRICS

PROG = "python -m analysis.profiles.cli"
COMMAND = "profread"  # the console command pyproject.toml installs
COMMANDS = ("summary", "breakdown", "diff")
DEFAULT_RUN = "profile"

_COMMANDS_TEXT = """\
commands:
  summary FILE...    per rank: wall time, the paper's CUDA metrics, the other launch APIs, top
                     CPU ops, what is absent and why; then the time breakdown. --out writes the
                     metrics CSV and the breakdown CSV beside it.
  breakdown FILE...  the time breakdown alone: per rank and device busy, idle, compute,
                     communication and its part not overlapped, host time blocked in CUDA calls.
  diff A B           two profiles of one job compared metric by metric (`diff --help`).
Without a command, `--run NAME --out F.csv FILE...` is `summary` writing both CSVs."""


def _listed(names: Iterable[str]) -> str:
    return textwrap.fill(", ".join(names), 96, initial_indent=" " * 11, subsequent_indent=" " * 11)


_EPILOG = f"""\
input files (one per rank; the kind is detected from the content):
  nsys      SQLite from `nsys export --type sqlite report.nsys-rep`
  torch     torch.profiler Chrome trace, *.pt.trace.json or *.pt.trace.json.gz
rank of each file: the rank recorded in a torch trace (distributedInfo), else "rankN" in the
file or folder name (rank0.sqlite, rank_1/trace.json), else the order on the command line.

output CSV columns: {", ".join(mt.COLUMNS)}
  metric   normalised name, one of the paper's:
{_listed(mt.METRICS)}
           or another kernel-launch API:
{_listed(mt.LAUNCH_METRICS)}
           torch traces also give "{mt.CPU_PREFIX}<op>" rows unless --no-cpu-ops: the op's calls and
           the wall time inside it (its calls' union, nested and cross-thread calls once)
  share    total_s / profiled wall time of that rank (summed durations of concurrent calls can
           exceed it); bytes only on memcpy rows.
  A metric absent from a profile has no row. The summary adds {mt.KERNEL_LAUNCH_ALL} (launches
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
{_listed(sorted(bdown.BLOCKING_CALLS))}

exit status: 0 read (and written); 1 a file could not be read or written (one line on stderr, no
CSV written); 2 usage.

examples:
  {COMMAND} summary rank0.sqlite rank1.sqlite
  {COMMAND} summary --out metrics.csv rank0.pt.trace.json.gz rank1.pt.trace.json.gz
  {PROG} --run llm-fsdp --out metrics.csv rank0.sqlite rank1.sqlite
  {COMMAND} diff before/ after/ --fail-if 5
"""


def at_least_one(text: str) -> int:
    """An argparse type: a whole number >= 1."""
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text!r}")
    return n


def build_parser(command: str | None = None, prog: str = PROG) -> argparse.ArgumentParser:
    """The parser of "summary", "breakdown", or the command-less form (None)."""
    what = {
        None: "Read nsys SQLite exports and/or torch.profiler traces of one run (one file per "
        "rank), write the tidy metrics CSV and the time breakdown CSV, and print where the time "
        "went.",
        "summary": "Print per rank where the time went (metrics and time breakdown); with --out, "
        "write the tidy metrics CSV and the breakdown CSV beside it.",
        "breakdown": "Print the time breakdown per rank and device; with --out, write its CSV.",
    }[command]
    parser = argparse.ArgumentParser(
        prog=prog if command is None else f"{prog} {command}",
        usage=None
        if command
        else f"%(prog)s {{{','.join(COMMANDS)}}} ...\n"
        f"       %(prog)s --run NAME --out F.csv FILE [FILE ...]",
        description=what if command else f"{what}\n\n{_COMMANDS_TEXT}",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help="profile file, one per rank")
    required = command is None
    parser.add_argument("--run", required=required,
                        help="run name written in the `run` column (default: --out's name "
                        f"without .csv, else {DEFAULT_RUN!r})")  # fmt: skip
    if command == "breakdown":
        parser.add_argument("--out", help="time-breakdown CSV to write (atomically)")
    else:
        parser.add_argument("--out", required=required, help="metrics CSV to write (atomically)")
        parser.add_argument("--breakdown-out",
                            help="time-breakdown CSV to write (default: beside --out)")  # fmt: skip
        parser.add_argument("--top", type=at_least_one, default=8,
                            help="CPU ops per rank in the summary (default 8)")  # fmt: skip
    parser.add_argument("--no-cpu-ops", action="store_true",
                        help='leave out the "cpu:<op>" rows of torch traces')  # fmt: skip
    steps.add_arguments(parser)
    return parser


def summary(
    rows: Sequence[mt.TidyRow], profiles: Sequence[tuple[int, mt.RankProfile]], top: int
) -> str:
    shown = {*mt.METRICS, *mt.LAUNCH_METRICS, *mt.COPY_METRICS, mt.KERNEL_LAUNCH_ALL}
    totals: dict[tuple[int, str], list[mt.MetricTotal]] = {}
    for t in mt.metric_totals(rows):
        totals.setdefault((t.rank, t.source), []).append(t)
    lines = []
    for rank, prof in sorted(profiles, key=lambda rp: (rp[0], rp[1].source)):
        # The activity span beside the wall: a share of a session much wider than it is small.
        act = "n/a" if math.isnan(prof.activity_s) else f"{prof.activity_s:.3f} s"
        hip = prof.device_kind == HIP  # a ROCm build's trace: labelled so, never CUDA
        lines.append(
            f"rank {rank} [{prof.source}{', ' + HIP if hip else ''}] {prof.path}: wall"
            f" {prof.wall_s:.3f} s ({prof.wall_from}), {'HIP' if hip else 'CUDA'} activity {act}"
        )
        mine = sorted(totals.get((rank, prof.source), []), key=lambda t: -t.total_s)
        paper = [t for t in mine if t.metric in shown or t.metric in HIP_METRICS]
        cpu = [t for t in mine if t.metric.startswith(mt.CPU_PREFIX)][:top]
        for t in paper + cpu:
            name = t.metric if len(t.metric) <= 40 else t.metric[:37] + "..."
            extra = "" if t.bytes is None else f"  {t.bytes / 1e6:.1f} MB"
            lines.append(
                f"  {name:<40} {t.total_s:10.4g} s {t.share:8.2%} {t.calls:>9} calls{extra}"
            )
        lines += _absent_lines({t.metric for t in mine}, prof.source, hip)
    return "\n".join(lines)


def _absent_lines(present: set[str], source: str, hip: bool = False) -> list[str]:
    """The paper's metrics this rank's profile lacks, by what the absence means. The CLI does
    not know the run's device: a profile with CUDA rows came from a GPU, so an absent metric
    there was not called (0); one without any is "not measured"."""
    absent = [m for m in mt.METRICS if m not in present]
    lines = []
    if hip:
        cuda = [m for m in absent if m.startswith("cuda")]
        absent = [m for m in absent if m not in cuda]
        lines.append(f"  not applicable to a {HIP} profile (its hip* calls): {', '.join(cuda)}")
    if not absent:
        return lines
    if not cov.has_cuda(present):
        return [*lines, f"  not measured (no CUDA in this profile): {', '.join(absent)}"]
    blind = [m for m in absent if m in cov.unrecordable([source])]
    rest = [m for m in absent if m not in blind]
    lines += [f"  {cov.not_recorded(source)}: {', '.join(blind)}"] if blind else []
    if rest:
        lines.append(f"  not called (0): {', '.join(rest)}")
    return lines


def read(args: argparse.Namespace, command: str | None, choice: steps.Choice | None) -> int:
    """Run `summary` (or the command-less form, None) or `breakdown` on parsed arguments."""
    try:
        # Every file read once, metrics and breakdown together, before anything is written, so
        # that a file failing leaves no CSV.
        both = load(args.files, not args.no_cpu_ops, choice)
    except (mt.ProfileError, steps.StepError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1 if isinstance(exc, mt.ProfileError) else 2
    run = args.run or (Path(args.out).stem if args.out else DEFAULT_RUN)
    split_rows = [row for rank, _, bd, _ in both for row in bdown.breakdown_rows(run, rank, bd)]
    lines = [
        bdown.breakdown_lines(rank, bd) + (steps.step_lines(rank, each) if each else [])
        for rank, _, bd, each in sorted(both, key=lambda got: (got[0], got[2].source))
    ]
    if command == "breakdown":
        tables = [(args.out, bdown.COLUMNS, split_rows)]
    else:
        profiles = [(rank, prof) for rank, prof, *_ in both]
        rows = mt.sort_rows(
            row for rank, prof in profiles for row in mt.profile_rows(run, rank, prof)
        )
        split_out = args.breakdown_out or (bdown.breakdown_path(args.out) if args.out else None)
        tables = [
            (args.out, mt.COLUMNS + mt.WALL_COLUMNS, rows),
            (split_out, bdown.COLUMNS, split_rows),
        ]
    if not mt.write_tables([t for t in tables if t[0]]):
        return 1
    if command != "breakdown":
        print(summary(rows, profiles, args.top))
    print("\n".join(line for block in lines for line in block))
    wrote = [f"{len(r)} rows to {dest}" for dest, _, r in tables if dest]
    if wrote:
        print(f"wrote {', '.join(wrote)}")
    return 0


def main(argv: Sequence[str] | None = None, prog: str = PROG) -> int:
    """Returns the exit status."""
    if run_names.settings_refused():
        return 2
    argv = sys.argv[1:] if argv is None else list(argv)
    command = argv[0] if argv[:1] and argv[0] in COMMANDS else None
    if command == "diff":
        # imported here so the plain CLI does not load the diff module (nor the reverse import)
        from . import diff

        return diff.main(argv[1:], prog=f"{prog} diff")
    parser = build_parser(command, prog)
    if not argv:
        print(f"{parser.format_usage()}\n{_COMMANDS_TEXT}\n\n`{prog} --help`: inputs, outputs,"
              " exit status", file=sys.stderr)  # fmt: skip
        return 2
    args = parser.parse_args(argv[1:] if command else argv)
    choice = steps.choice_of(args, parser)
    return read(args, command, choice)


def console() -> int:
    return main(prog=COMMAND)


if __name__ == "__main__":
    sys.exit(main())
