"""Before and after: per metric, two profiles' values and the change (`cli diff A B`).

A side is one path, or several joined by commas (one file per rank):
  - a profile file (nsys SQLite export, torch.profiler trace), read as the CLI reads it;
  - a metrics CSV (the CLI's --out, or a run folder's profile_metrics.csv);
  - a run folder: its profile_metrics.csv if present, else its traces under the folder names
    run/node/profiling.py defines (nsys/*.sqlite, torch_traces/*.pt.trace.json*). nsys reports
    are not exported here: a diff only reads, it never writes into a run folder.

Ranks are added up per metric: calls, total_s and bytes are sums over the side's ranks, share is
the mean over its ranks (a rank without the metric counts 0), so two jobs with different rank
counts are compared per job, not per rank. Two rows are derived per side: PAPER_TOTAL (the paper's
metrics summed) and WALL (profiled wall time of the slowest rank, where the table records it).

The time breakdown (the issue's item 2, analysis/profiles/breakdown.py) is compared too, as rows
breakdown:busy, breakdown:idle, ... (seconds summed over ranks and devices; diff_breakdown.py says
where each side's comes from). A side without one gets one line saying so, not an error.

Every other metric row the profiles give is compared, whatever its name; a further derived row
needs only its function appended to DERIVERS (each takes and returns a `by_metric` frame).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd

from run import settings
from run.node import profiling

from . import detect_source, load_profiles
from . import diff_breakdown as split
from .metrics import (
    METRICS,
    ProfileError,
    add_launch_all,
    by_metric,
    concat_frames,
    profile_frame,
    read_metrics_csv,
    write_csv_atomic,
)
from .nsys_sqlite import with_capture

PAPER_TOTAL = "paper_total"
WALL = "wall"
FIELDS = ("calls", "total_s", "bytes", "share")
# The --fail-if default: the paper's metrics measure the same work in both jobs, while the wall
# time also moves with the capture window (nsys capture mode, profiler schedule) of each run.
DEFAULT_FAIL_METRICS = (PAPER_TOTAL,)
# Functions adding derived metric rows to a `by_metric` frame.
DERIVERS: list[Callable[[pd.DataFrame], pd.DataFrame]] = [add_launch_all]
CSV_COLUMNS = ["metric", "field", "a", "b", "change", "change_pct", "present"]

_EPILOG = f"""\
A and B: a profile file, a metrics CSV, a run folder, or several files joined by commas
(rank0.sqlite,rank1.sqlite). calls, total_s and bytes are summed over ranks; share is the mean
over ranks. Derived rows: {PAPER_TOTAL} (the paper's metrics summed), {WALL} (slowest rank's
profiled wall time), breakdown:<quantity> (the time breakdown, seconds summed over ranks and
devices; from the traces, or the breakdown CSV beside a metrics CSV). A metric present on one
side only is marked "only in A/B"; a side without a breakdown gets one line saying so.

--fail-if PCT: exit 1 when a chosen metric's total_s (wall time for "{WALL}") is more than PCT %
higher in B than in A (one line on stderr naming it). Metrics: --metric, repeatable; default
{", ".join(DEFAULT_FAIL_METRICS)}. A metric absent from one side counts 0 there, but a
breakdown:<quantity> metric against a side without a breakdown is refused (exit 2).

exit status: 0 compared (and nothing regressed past --fail-if); 1 regression past --fail-if, or
a file could not be read; 2 usage, a --metric in neither side, or unrelated sides: no metric in
common, or nsys on one side and torch on the other (unless --allow-mixed). On errors nothing is
written; on a regression the --out CSV is still written.

example:
  python -m analysis.profiles.cli diff runs/before runs/after --fail-if 5 --out diff.csv
"""


class UnrelatedError(Exception):
    """Two sides that should not be compared; the message is one line naming both."""


def percent(text: str) -> float:
    """An argparse type: a finite number (a NaN threshold would let every regression pass)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number of percent, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The diff subcommand's parser (separate so tests and docs can inspect it)."""
    parser = argparse.ArgumentParser(
        prog="python -m analysis.profiles.cli diff",
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
    return parser


def _read_csv(path: Path) -> pd.DataFrame:
    try:
        return read_metrics_csv(path)
    except FileNotFoundError as exc:
        raise ProfileError(path, "file not found") from exc
    except OSError as exc:
        raise ProfileError(path, f"cannot read file ({exc.strerror or exc})") from exc
    except (ValueError, KeyError) as exc:
        # pandas' parse errors are ValueErrors; a missing column is a KeyError from the dtypes
        raise ProfileError(path, f"not a metrics CSV ({str(exc).splitlines()[0]})") from exc


def _profiles_table(run: str, files: Sequence[Path], capture: str | None, cpu_ops: bool):
    profiles = load_profiles(files, cpu_ops)
    if capture is not None:
        profiles = [(r, with_capture(p, capture)) for r, p in profiles]
    return concat_frames(profile_frame(run, r, p) for r, p in profiles)


# A side's parts: the metrics table, its breakdown rows, and why there are none (when None).
Part = tuple[pd.DataFrame, pd.DataFrame | None, str]


def _run_folder(folder: Path, cpu_ops: bool, traces: bool) -> Part:
    csv = folder / profiling.PROFILE_METRICS
    files = sorted((folder / profiling.NSYS_DIR).glob("*.sqlite"))
    files += sorted((folder / profiling.TORCH_TRACE_DIR).rglob(profiling.TORCH_TRACE_GLOB))
    if csv.is_file():
        table = _read_csv(csv)
        split_df, why = split.beside(csv)
        if split_df is None and files and traces:
            split_df = split.from_files(folder.name, files)
        return table, split_df, why
    if not files:
        raise ProfileError(
            folder,
            f"no {profiling.PROFILE_METRICS} and no traces ({profiling.NSYS_DIR}/*.sqlite, "
            f"{profiling.TORCH_TRACE_DIR}/{profiling.TORCH_TRACE_GLOB})",
        )
    # the same wall time collect.py would choose for this run's nsys capture mode
    table = _profiles_table(folder.name, files, profiling.read_capture(folder), cpu_ops)
    if not traces:
        return table, None, f"{folder}: traces not read for the breakdown"
    return table, split.from_files(folder.name, files), ""


def read_side(spec: str, cpu_ops: bool = True, traces: bool = True) -> Part:
    """A side's metrics table, breakdown rows (None if it has none) and why it has none.

    traces=False reads no trace for the breakdown where a metrics CSV stands in (an nsys export
    can be gigabytes): the breakdown is then only the CSV beside it. ProfileError on bad input.
    """
    paths = [Path(p) for p in spec.split(",") if p]
    if not paths:
        raise ProfileError(spec, "no file named")
    parts, files = [], []
    for path in paths:
        if path.is_dir():
            parts.append(_run_folder(path, cpu_ops, traces))
        elif path.suffix.lower() == ".csv":
            parts.append((_read_csv(path), *split.beside(path)))
        else:
            detect_source(path)  # the one-line error for a missing or foreign file, read first
            files.append(path)
    if files:
        parts.append(
            (_profiles_table(spec, files, None, cpu_ops), split.from_files(spec, files), "")
        )
    table = concat_frames(t for t, _, _ in parts)
    # a breakdown of some of the side's ranks only would compare part of one job with another
    whys = [why for _, s, why in parts if s is None]
    if whys:
        return table, None, whys[0]
    return table, pd.concat([s for _, s, _ in parts], ignore_index=True), ""


def load_side(spec: str, cpu_ops: bool = True) -> pd.DataFrame:
    """The tidy metrics table of one side (see the module doc); ProfileError on bad input."""
    return read_side(spec, cpu_ops, traces=False)[0]


def aggregate(table: pd.DataFrame) -> pd.DataFrame:
    """One row per metric over the side's ranks (index metric; columns FIELDS)."""
    grouped = by_metric(table)
    for derive in DERIVERS:
        grouped = derive(grouped)
    ranks = max(len(table[["run", "rank", "source"]].drop_duplicates()), 1)
    agg = grouped.groupby("metric", sort=False).agg(
        calls=("calls", "sum"),
        total_s=("total_s", "sum"),
        bytes=("bytes", lambda s: float(s.sum()) if s.notna().any() else math.nan),
        share=("share", "sum"),
    )
    agg = agg.astype("float64")
    agg["share"] = agg["share"] / ranks
    paper = agg[agg.index.isin(list(METRICS))]
    if len(paper):
        agg.loc[PAPER_TOTAL] = [paper["calls"].sum(), paper["total_s"].sum(), math.nan,
                                paper["share"].sum()]  # fmt: skip
    if "wall_s" in table.columns and table["wall_s"].notna().any():
        agg.loc[WALL] = [math.nan, float(table["wall_s"].max()), math.nan, math.nan]
    return agg


def kinds(table: pd.DataFrame) -> list[str]:
    """The profiler kinds (nsys, torch) a side's rows came from."""
    return sorted(set(table["source"]))


def check_related(a: pd.DataFrame, b: pd.DataFrame, names: tuple[str, str], mixed: bool) -> None:
    """UnrelatedError (one line naming both) for sides that cannot be compared."""
    ka, kb = kinds(a), kinds(b)
    if not mixed:
        for label, name, k in (("A", names[0], ka), ("B", names[1], kb)):
            if len(k) > 1:
                raise UnrelatedError(f"{label} {name} holds {' and '.join(k)} profiles, whose "
                                     "rows would add up; give one kind (or --allow-mixed)")  # fmt: skip
        if ka != kb:
            raise UnrelatedError(f"A {names[0]} is {'+'.join(ka) or 'empty'}, B {names[1]} is "
                                 f"{'+'.join(kb) or 'empty'}: different profilers "
                                 "(--allow-mixed to compare anyway)")  # fmt: skip
    if not set(a["metric"]) & set(b["metric"]):
        raise UnrelatedError(f"A {names[0]} and B {names[1]} share no metric: not the same job")


def _pct(a: float, b: float) -> float:
    if a > 0:
        return (b - a) / a * 100
    return math.inf if b > 0 else 0.0


def compare(agg_a: pd.DataFrame, agg_b: pd.DataFrame) -> pd.DataFrame:
    """Tidy diff (CSV_COLUMNS): one row per (metric, field) with a value on either side."""
    records = []
    for metric in _order([*agg_a.index, *agg_b.index]):
        in_a, in_b = metric in agg_a.index, metric in agg_b.index
        present = "both" if in_a and in_b else ("A" if in_a else "B")
        for field in FIELDS:
            a = agg_a.at[metric, field] if in_a else math.nan
            b = agg_b.at[metric, field] if in_b else math.nan
            if math.isnan(a) and math.isnan(b):
                continue
            both = not (math.isnan(a) or math.isnan(b))
            records.append({
                "metric": metric, "field": field, "a": a, "b": b,
                "change": b - a if both else math.nan,
                "change_pct": _pct(a, b) if both else math.nan, "present": present,
            })  # fmt: skip
    return pd.DataFrame.from_records(records, columns=CSV_COLUMNS)


def _order(metrics: list[str]) -> list[str]:
    """Derived totals first, then the paper's metrics in its order, then the rest by name."""
    first = [PAPER_TOTAL, WALL, *METRICS, *split.ROWS]
    seen = dict.fromkeys(metrics)
    return [m for m in first if m in seen] + sorted(m for m in seen if m not in first)


def _value(field: str, v: float, signed: bool = False) -> str:
    if math.isnan(v):
        return "-"
    sign = "+" if signed else ""
    if field == "calls":
        return f"{v:{sign},.0f}"
    if field == "total_s":
        return f"{v:{sign}.4g} s"
    if field == "bytes":
        return f"{v / 1e6:{sign}.4g} MB"
    return f"{v * 100:{sign}.2f} pp" if signed else f"{v:.2%}"


def _pct_text(p: float) -> str:
    if math.isnan(p):
        return ""
    return "new" if math.isinf(p) else f"{p:+.1f}%"


def render(diff: pd.DataFrame, header: Sequence[str]) -> str:
    """The printed table: A and B values, change and % per metric and field."""
    lines = [*header, f"{'metric':<34} {'field':<8} {'A':>13} {'B':>13} {'change':>13} {'%':>8}"]
    for metric, rows in diff.groupby("metric", sort=False):
        name = metric if len(metric) <= 34 else metric[:31] + "..."
        present = rows["present"].iloc[0]
        if present != "both":
            got = ", ".join(f"{r.field} {_value(r.field, r.a if present == 'A' else r.b)}"
                            for r in rows.itertuples())  # fmt: skip
            lines.append(f"{name:<34} only in {present} ({got})")
            continue
        for r in rows.itertuples():
            lines.append(
                f"{name:<34} {r.field:<8} {_value(r.field, r.a):>13} {_value(r.field, r.b):>13}"
                f" {_value(r.field, r.change, True):>13} {_pct_text(r.change_pct):>8}"
            )
            name = ""
    return "\n".join(lines)


def regressions(
    agg_a: pd.DataFrame, agg_b: pd.DataFrame, metrics: Sequence[str], pct: float
) -> list[str]:
    """One line per chosen metric whose time grew by more than pct % from A to B.

    KeyError names a metric neither side has (a typo must not pass a CI silently).
    """
    lines = []
    for m in metrics:
        if m not in agg_a.index and m not in agg_b.index:
            raise KeyError(m)
        a = agg_a.at[m, "total_s"] if m in agg_a.index else 0.0
        b = agg_b.at[m, "total_s"] if m in agg_b.index else 0.0
        grew = _pct(a, b)
        if grew > pct:
            lines.append(f"slower: {m} {a:.4g} s -> {b:.4g} s ({_pct_text(grew)} > {pct:g}%)")
    return lines


def _side_line(label: str, spec: str, table: pd.DataFrame) -> str:
    ranks = len(table[["run", "rank", "source"]].drop_duplicates())
    return f"{label}: {spec} [{'+'.join(kinds(table)) or 'empty'}, {ranks} rank(s)]"


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `cli diff`; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.metric and args.fail_if is None:
        parser.error("--metric only chooses what --fail-if checks; give --fail-if too")
    if not settings.check_all_or_say():
        return 2
    try:
        table_a, split_a, why_a = read_side(args.a, cpu_ops=not args.no_cpu_ops)
        table_b, split_b, why_b = read_side(args.b, cpu_ops=not args.no_cpu_ops)
    except ProfileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    try:
        check_related(table_a, table_b, (args.a, args.b), args.allow_mixed)
    except UnrelatedError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    agg_a, agg_b = aggregate(table_a), aggregate(table_b)
    missing = split.missing_line(None if split_a is not None else why_a,
                                 None if split_b is not None else why_b)  # fmt: skip
    if missing is None:
        agg_a = pd.concat([agg_a, split.aggregate(split_a)])
        agg_b = pd.concat([agg_b, split.aggregate(split_b)])
    slower: list[str] = []
    if args.fail_if is not None:
        chosen = [m for m in args.metric or () if m.startswith(split.PREFIX)]
        if chosen and missing is not None:
            # counting a missing breakdown as 0 would let any regression pass
            print(f"error: --metric {chosen[0]}: {missing}", file=sys.stderr)
            return 2
        try:
            slower = regressions(agg_a, agg_b, args.metric or DEFAULT_FAIL_METRICS, args.fail_if)
        except KeyError as exc:
            print(f"error: --metric {exc.args[0]} is in neither A nor B", file=sys.stderr)
            return 2
    diff = compare(agg_a, agg_b)
    if args.out:
        try:
            write_csv_atomic(diff, args.out)
        except OSError as exc:
            print(f"error: {args.out}: cannot write ({exc.strerror or exc})", file=sys.stderr)
            return 1
    header = [_side_line("A", args.a, table_a), _side_line("B", args.b, table_b)]
    header += [missing] if missing else []
    print(render(diff, header))
    if args.out:
        print(f"wrote {len(diff)} rows to {args.out}")
    for line in slower:
        print(line, file=sys.stderr)
    return 1 if slower else 0
