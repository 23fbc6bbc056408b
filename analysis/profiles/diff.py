"""Before and after: per metric, two profiles' values and the change (`cli diff A B`).

A side is one path, or several joined by commas (one file per rank): a profile file, read as the
CLI reads it; a metrics CSV (the CLI's --out, a run folder's profile_metrics.csv), with the
breakdown CSV beside it if any; or a run folder: its profile_metrics.csv if present, else its
traces under run/node/profiling.py's folder names. nsys reports are not exported here: a diff only
reads, never writes into a run folder. The reader installed on its own has no run/: it refuses a
folder in one line (run_names.py). A side without a breakdown gets one line saying so.

Plain rows throughout, no pandas: the diff is part of the installable reader. Only `run_diff`,
the artifact's few rows of `cli diff` on two run folders, makes a frame.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from . import detect_source, load, rank_from_path, read_profile_breakdown, run_names, steps
from . import diff_table as dt
from .breakdown import Breakdown, breakdown_path, breakdown_rows
from .diff_table import CSV_COLUMNS, PAPER_TOTAL, WALL  # the artifact imports them from here
from .metrics import ProfileError, TidyRow, profile_rows, read_metrics_rows, reading, write_tables
from .steps import Choice, StepError

if TYPE_CHECKING:
    import pandas as pd

TOP = 5  # run_diff's movers kept beside the derived rows

_EPILOG = f"""\
A and B: a profile file, a metrics CSV, a run folder, or several files joined by commas
(rank0.sqlite,rank1.sqlite). calls, total_s and bytes are summed over ranks; share is the mean
over ranks. Derived rows: {PAPER_TOTAL} (the paper's metrics summed), {WALL} (slowest rank's
profiled wall time), breakdown:<quantity> (the time breakdown, seconds summed over ranks and
devices; from the traces, or the breakdown CSV beside a metrics CSV). A metric present on one
side only is marked "only in A/B"; a side without a breakdown gets one line saying so.

--fail-if PCT: exit 1 when a chosen metric's total_s (wall time for "{WALL}") is more than PCT %
higher in B than in A (one line on stderr naming it). Metrics: --metric, repeatable; default
{", ".join(dt.DEFAULT_FAIL_METRICS)}. A metric absent from one side counts 0 there, but a
breakdown:<quantity> metric against a side without a breakdown is refused (exit 2).

exit status: 0 compared (and nothing regressed past --fail-if); 1 regression past --fail-if, or
a file could not be read; 2 usage, a --metric in neither side, or unrelated sides: no metric in
common, or nsys on one side and torch on the other (unless --allow-mixed). On errors nothing is
written; on a regression the --out CSV is still written.

examples:
  profread diff runs/before runs/after --fail-if 5 --out diff.csv
  python -m analysis.profiles.cli diff before.pt.trace.json.gz after.pt.trace.json.gz
"""


class UnrelatedError(Exception):
    """Two sides that should not be compared: one line naming both."""


def percent(text: str) -> float:
    """An argparse type: a finite number (a NaN threshold would let every regression pass)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number of percent, got {text!r}")
    return value


def build_parser(prog: str = "python -m analysis.profiles.cli diff") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Compare two profiles of the same job (before A, after B) metric by metric.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("a", metavar="A", help="before: file(s), metrics CSV or run folder")
    parser.add_argument("b", metavar="B", help="after: file(s), metrics CSV or run folder")
    parser.add_argument("--fail-if", type=percent, metavar="SLOWER_THAN_PCT",
                        help="exit 1 when B is slower than A by more than this %% on a metric")  # fmt: skip
    parser.add_argument("--metric", action="append", metavar="M",
                        help=f"metric checked by --fail-if (repeatable; default {PAPER_TOTAL})")  # fmt: skip
    parser.add_argument("--out", help="tidy diff CSV to write (atomically)")
    parser.add_argument("--allow-mixed", action="store_true",
                        help="compare nsys with torch profiles (their numbers differ in kind)")  # fmt: skip
    parser.add_argument("--no-cpu-ops", action="store_true",
                        help='leave out the "cpu:<op>" rows of torch traces')  # fmt: skip
    steps.add_arguments(parser)
    return parser


def _read_csv(path: Path) -> list[TidyRow]:
    try:
        with reading(path):
            return read_metrics_rows(path)
    except ValueError as exc:  # a missing column, a field that is not a number, not UTF-8
        raise ProfileError(path, f"not a metrics CSV ({str(exc).splitlines()[0]})") from exc


# A side: the metrics rows, its breakdown (None if it has none), and why it has none.
Side = tuple[list[TidyRow], list[dt.Part] | None, str]


def _parts(run: str, rank: int, bd: Breakdown) -> list[dt.Part]:
    return [
        dt.Part(str(r[3]), r[4], float(r[5]), float(r[6])) for r in breakdown_rows(run, rank, bd)
    ]


def from_files(run: str, files: Sequence[str | os.PathLike[str]]) -> list[dt.Part]:
    """Breakdown Parts of profile files. Ranks come from the file names, else the order: the diff
    only sums over ranks, so the rank a trace records inside (read with the metrics) changes
    nothing."""
    out = []
    for i, path in enumerate(files):
        rank = rank_from_path(path)
        out += _parts(run, i if rank is None else rank, read_profile_breakdown(path)[1])
    return out


def beside(metrics_csv: Path) -> tuple[list[dt.Part] | None, str]:
    """The breakdown CSV beside a metrics CSV, or (None, why there is none)."""
    path = breakdown_path(metrics_csv)
    if not path.is_file():
        return None, f"{metrics_csv} has no {path.name} beside it"
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            lines = list(csv.reader(fh))
    except OSError as exc:
        raise ProfileError(path, f"cannot read file ({exc.strerror or exc})") from exc
    except ValueError as exc:  # not UTF-8, a NUL byte
        raise ProfileError(path, f"not a breakdown CSV ({str(exc).splitlines()[0]})") from exc
    header = lines[0] if lines else []
    need = ("device", "quantity", "seconds", "share_of_window")
    missing = [c for c in need if c not in header]
    if missing:
        raise ProfileError(path, f"not a breakdown CSV (no column {', '.join(missing)})")
    at = [header.index(c) for c in need]
    try:
        return [_part([cells[i] for i in at]) for cells in lines[1:] if cells], ""
    except (ValueError, IndexError) as exc:
        raise ProfileError(path, f"not a breakdown CSV ({exc})") from exc


def _part(cells: list[str]) -> Side:
    device, quantity, seconds, share = cells
    return dt.Part(device, quantity, float(seconds) if seconds else math.nan,
                   float(share) if share else math.nan)  # fmt: skip


def _files(
    run: str, files: Sequence[Path], capture: str | None, cpu_ops: bool, choice: Choice | None
) -> Side:
    """Metrics and breakdown of profile files from one reading of each, over the wall the run's
    nsys capture mode calls for where it is known, or the chosen steps' window."""
    read = load(files, cpu_ops, choice, capture)
    rows = [row for rank, prof, *_ in read for row in profile_rows(run, rank, prof)]
    return rows, [p for rank, _, bd, _ in read for p in _parts(run, rank, bd)], ""


def _run_folder(folder: Path, cpu_ops: bool, traces: bool, choice: Choice | None) -> Side:
    profiling = run_names.needed(folder)
    csv = folder / profiling.PROFILE_METRICS
    files = sorted((folder / profiling.NSYS_DIR).glob("*.sqlite"))
    files += sorted((folder / profiling.TORCH_TRACE_DIR).rglob(profiling.TORCH_TRACE_GLOB))
    if csv.is_file() and choice is None:
        rows = _read_csv(csv)
        parts, why = beside(csv)
        if parts is None and files and traces:
            parts = from_files(folder.name, files)
        return rows, parts, why
    if not files:
        raise ProfileError(
            folder,
            f"no {profiling.PROFILE_METRICS} and no traces ({profiling.NSYS_DIR}/*.sqlite, "
            f"{profiling.TORCH_TRACE_DIR}/{profiling.TORCH_TRACE_GLOB})",
        )
    # the same wall time collect.py would choose for this run's nsys capture mode
    rows, parts, _ = _files(folder.name, files, profiling.read_capture(folder), cpu_ops, choice)
    if not traces:
        return rows, None, f"{folder}: traces not read for the breakdown"
    return rows, parts, ""


def read_side(
    spec: str, cpu_ops: bool = True, traces: bool = True, choice: Choice | None = None
) -> Side:
    """A side's metrics rows, breakdown (None if it has none) and why it has none.

    traces=False reads no trace for the breakdown where a metrics CSV stands in (an nsys export
    can be gigabytes). choice: only those steps, from the profile files; a metrics CSV holds no
    steps (StepError). ProfileError on bad input.
    """
    paths = [Path(p) for p in spec.split(",") if p]
    if not paths:
        raise ProfileError(spec, "no file named")
    parts, files = [], []
    for path in paths:
        if path.is_dir():
            parts.append(_run_folder(path, cpu_ops, traces, choice))
        elif path.suffix.lower() == ".csv" and choice is not None:
            raise StepError(f"{path}: a metrics CSV holds no steps; give the profile files")
        elif path.suffix.lower() == ".csv":
            parts.append((_read_csv(path), *beside(path)))
        else:
            detect_source(path)  # the one-line error for a missing or foreign file, read first
            files.append(path)
    if files:
        parts.append(_files(spec, files, None, cpu_ops, choice))
    rows = [r for table, _, _ in parts for r in table]
    # a breakdown of some of the side's ranks only would compare part of one job with another
    whys = [why for _, s, why in parts if s is None]
    if whys:
        return rows, None, whys[0]
    return rows, [p for _, s, _ in parts for p in s], ""


def check_related(
    a: Sequence[TidyRow], b: Sequence[TidyRow], names: tuple[str, str], mixed: bool
) -> None:
    ka, kb = dt.kinds(a), dt.kinds(b)
    if not mixed:
        for label, name, k in (("A", names[0], ka), ("B", names[1], kb)):
            if len(k) > 1:
                raise UnrelatedError(f"{label} {name} holds {' and '.join(k)} profiles, whose "
                                     "rows would add up; give one kind (or --allow-mixed)")  # fmt: skip
        if ka != kb:
            raise UnrelatedError(f"A {names[0]} is {'+'.join(ka) or 'empty'}, B {names[1]} is "
                                 f"{'+'.join(kb) or 'empty'}: different profilers "
                                 "(--allow-mixed to compare anyway)")  # fmt: skip
    if not {r.metric for r in a} & {r.metric for r in b}:
        raise UnrelatedError(f"A {names[0]} and B {names[1]} share no metric: not the same job")


def _side_line(label: str, spec: str, rows: Sequence[TidyRow]) -> str:
    return f"{label}: {spec} [{'+'.join(dt.kinds(rows)) or 'empty'}, {len(dt.ranks(rows))} rank(s)]"


def both_figures(
    side_a: Side, side_b: Side, names: tuple[str, str], mixed: bool = False
) -> tuple[dt.Figures, dt.Figures, str | None]:
    """Each side's figures, breakdown included where both have one, and the line saying it is
    not compared (None when it is)."""
    (rows_a, split_a, why_a), (rows_b, split_b, why_b) = side_a, side_b
    check_related(rows_a, rows_b, names, mixed)
    agg_a, agg_b = dt.aggregate(rows_a), dt.aggregate(rows_b)
    missing = dt.missing_line(None if split_a is not None else why_a,
                              None if split_b is not None else why_b)  # fmt: skip
    if missing is None:
        agg_a.update(dt.breakdown_figures(split_a))
        agg_b.update(dt.breakdown_figures(split_b))
    return agg_a, agg_b, missing


def profiled(run_dir: Path) -> bool:
    """Whether the run left the metrics the sweep collects after a profiled run."""
    return (run_dir / run_names.needed(run_dir).PROFILE_METRICS).is_file()


def _moved(row: dt.DiffRow) -> float:
    # a metric on one side only moved by all of its time
    if not math.isnan(row.change):
        return abs(row.change)
    return abs(row.b if math.isnan(row.a) else row.a)


def chosen(diff_rows: Sequence[dt.DiffRow], top: int = TOP) -> list[str]:
    """Derived totals and breakdown first, then the `top` metrics whose time moved most."""
    names = {r.metric for r in diff_rows}
    fixed = [m for m in (PAPER_TOTAL, WALL, *dt.BREAKDOWN_ROWS) if m in names]
    moved: dict[str, float] = {}
    for r in diff_rows:
        if r.field == "total_s" and r.metric not in fixed and r.metric not in moved:
            moved[r.metric] = _moved(r)
    movers = sorted((m for m, v in moved.items() if not math.isnan(v) and v > 0),
                    key=lambda m: -moved[m])  # fmt: skip
    return fixed + movers[:top]


def run_diff(a: Path, b: Path, top: int = TOP) -> tuple[pd.DataFrame, str]:
    """`cli diff A B` of two run folders for an artifact's table: the rows of the `chosen`
    metrics, and the line saying a breakdown was not compared (or ""). No trace is read: a table
    build must not parse an nsys export of gigabytes."""
    import pandas as pd  # the artifact's frame: the reader itself needs no pandas

    side_a = read_side(str(a), traces=False)
    side_b = read_side(str(b), traces=False)
    agg_a, agg_b, missing = both_figures(side_a, side_b, (str(a), str(b)))
    rows = dt.compare(agg_a, agg_b)
    order = {m: i for i, m in enumerate(chosen(rows, top))}
    kept = sorted((r for r in rows if r.metric in order), key=lambda r: order[r.metric])
    return pd.DataFrame.from_records(kept, columns=CSV_COLUMNS), missing or ""


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    """`cli diff` (cli.main has checked the settings); returns the exit status."""
    parser = build_parser(prog) if prog else build_parser()
    args = parser.parse_args(argv)
    if args.metric and args.fail_if is None:
        parser.error("--metric only chooses what --fail-if checks; give --fail-if too")
    choice = steps.choice_of(args, parser)
    try:
        side_a = read_side(args.a, not args.no_cpu_ops, choice=choice)
        side_b = read_side(args.b, not args.no_cpu_ops, choice=choice)
        agg_a, agg_b, missing = both_figures(side_a, side_b, (args.a, args.b), args.allow_mixed)
    except (ProfileError, StepError, UnrelatedError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1 if isinstance(exc, ProfileError) else 2
    slower: list[str] = []
    if args.fail_if is not None:
        asked = [m for m in args.metric or () if m.startswith(dt.BREAKDOWN)]
        if asked and missing is not None:
            # counting a missing breakdown as 0 would let any regression pass
            print(f"error: --metric {asked[0]}: {missing}", file=sys.stderr)
            return 2
        try:
            slower = dt.regressions(
                agg_a, agg_b, args.metric or dt.DEFAULT_FAIL_METRICS, args.fail_if
            )
        except KeyError as exc:
            print(f"error: --metric {exc.args[0]} is in neither A nor B", file=sys.stderr)
            return 2
    diff = dt.compare(agg_a, agg_b)
    if args.out and not write_tables([(args.out, CSV_COLUMNS, diff)]):
        return 1
    header = [_side_line("A", args.a, side_a[0]), _side_line("B", args.b, side_b[0])]
    header += [missing] if missing else []
    print(dt.render(diff, header))
    if args.out:
        print(f"wrote {len(diff)} rows to {args.out}")
    for line in slower:
        print(line, file=sys.stderr)
    return 1 if slower else 0
