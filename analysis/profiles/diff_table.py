"""The figures of `cli diff`: a side's metrics and time breakdown summed per job, the change, the
printed table. diff.py reads the two sides; this module only computes and formats (no pandas).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from .breakdown import HOST, QUANTITIES
from .metrics import METRICS, MetricTotal, TidyRow, metric_totals

PAPER_TOTAL = "paper_total"
BREAKDOWN = "breakdown:"
# window is left out: each row's share is already of its window, and a window summed over devices
# and the host row would count one span several times.
BREAKDOWN_ROWS = tuple(BREAKDOWN + q for q in QUANTITIES if q != "window")
WALL = "wall"
FIELDS = ("calls", "total_s", "bytes", "share")
# The --fail-if default: the paper's metrics measure the same work in both jobs, while the wall
# time also moves with the capture window (nsys capture mode, profiler schedule) of each run.
DEFAULT_FAIL_METRICS = (PAPER_TOTAL,)
CSV_COLUMNS = ["metric", "field", "a", "b", "change", "change_pct", "present"]
# A side's figures: metric -> field (FIELDS) -> value, NaN where the field does not apply.
Figures = dict[str, dict[str, float]]


class Part(NamedTuple):
    """What the diff needs of one breakdown row (breakdown.COLUMNS)."""

    device: str
    quantity: str
    seconds: float
    share: float


class DiffRow(NamedTuple):
    metric: str
    field: str
    a: float
    b: float
    change: float
    change_pct: float
    present: str


def ranks(rows: Sequence[TidyRow]) -> set[tuple[str, int, str]]:
    return {(r.run, r.rank, r.source) for r in rows}


def aggregate(rows: Sequence[TidyRow]) -> Figures:
    """One entry per metric over the side's ranks: FIELDS, NaN where a field does not apply.
    calls, total_s and bytes are sums over ranks, share the mean (a rank without it counts 0)."""
    totals = metric_totals(rows)
    n_ranks = max(len(ranks(rows)), 1)
    by: dict[str, list[MetricTotal]] = {}
    for t in totals:
        by.setdefault(t.metric, []).append(t)
    agg: Figures = {}
    for metric, group in by.items():
        sizes = [t.bytes for t in group if t.bytes is not None]
        agg[metric] = {
            "calls": float(sum(t.calls for t in group)),
            "total_s": math.fsum(t.total_s for t in group),
            "bytes": float(sum(sizes)) if sizes else math.nan,
            "share": math.fsum(t.share for t in group) / n_ranks,
        }
    paper = [agg[m] for m in agg if m in METRICS]
    if paper:
        agg[PAPER_TOTAL] = {
            "calls": math.fsum(f["calls"] for f in paper),
            "total_s": math.fsum(f["total_s"] for f in paper),
            "bytes": math.nan,
            "share": math.fsum(f["share"] for f in paper),
        }
    walls = [r.wall_s for r in rows if not math.isnan(r.wall_s)]
    if walls:
        agg[WALL] = {"calls": math.nan, "total_s": max(walls), "bytes": math.nan, "share": math.nan}
    return agg


def breakdown_figures(rows: Iterable[Part]) -> Figures:
    """One entry per BREAKDOWN_ROWS name present: total_s the seconds summed over ranks and
    devices (host_blocked over ranks), so jobs compare per job; share the mean share of window."""
    rows = list(rows)
    out = {}
    for name in BREAKDOWN_ROWS:
        quantity = name.removeprefix(BREAKDOWN)
        host = quantity == "host_blocked"
        mine = [r for r in rows if r.quantity == quantity and (r.device == HOST) == host]
        if mine:
            shares = [r.share for r in mine if not math.isnan(r.share)]
            mean = math.fsum(shares) / len(shares) if shares else math.nan
            total = math.fsum(r.seconds for r in mine if not math.isnan(r.seconds))
            out[name] = {"calls": math.nan, "total_s": total, "bytes": math.nan, "share": mean}
    return out


def missing_line(why_a: str | None, why_b: str | None) -> str | None:
    """The one line saying which side has no breakdown (None when both have one)."""
    if why_a is None and why_b is None:
        return None
    if why_a is not None and why_b is not None:
        return f"breakdown: not compared, neither side has one (A: {why_a}; B: {why_b})"
    label, why = ("A", why_a) if why_a is not None else ("B", why_b)
    return f"breakdown: not compared, {label} has none ({why})"


def kinds(rows: Sequence[TidyRow]) -> list[str]:
    return sorted({r.source for r in rows})


def _pct(a: float, b: float) -> float:
    if a > 0:
        return (b - a) / a * 100
    return math.inf if b > 0 else 0.0


def compare(agg_a: Figures, agg_b: Figures) -> list[DiffRow]:
    """One row per (metric, field) with a value on either side."""
    rows = []
    for metric in _order([*agg_a, *agg_b]):
        in_a, in_b = metric in agg_a, metric in agg_b
        present = "both" if in_a and in_b else ("A" if in_a else "B")
        for field in FIELDS:
            a = agg_a[metric][field] if in_a else math.nan
            b = agg_b[metric][field] if in_b else math.nan
            if math.isnan(a) and math.isnan(b):
                continue
            both = not (math.isnan(a) or math.isnan(b))
            rows.append(DiffRow(metric, field, a, b, b - a if both else math.nan,
                                _pct(a, b) if both else math.nan, present))  # fmt: skip
    return rows


def _order(metrics: list[str]) -> list[str]:
    """Derived totals first, then the paper's metrics in its order, then the rest by name."""
    first = [PAPER_TOTAL, WALL, *METRICS, *BREAKDOWN_ROWS]
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


def render(diff: Sequence[DiffRow], header: Sequence[str]) -> str:
    lines = [*header, f"{'metric':<34} {'field':<8} {'A':>13} {'B':>13} {'change':>13} {'%':>8}"]
    for metric, group in itertools.groupby(diff, key=lambda r: r.metric):
        rows = list(group)
        name = metric if len(metric) <= 34 else metric[:31] + "..."
        present = rows[0].present
        if present != "both":
            got = ", ".join(f"{r.field} {_value(r.field, r.a if present == 'A' else r.b)}"
                            for r in rows)  # fmt: skip
            lines.append(f"{name:<34} only in {present} ({got})")
            continue
        for r in rows:
            lines.append(
                f"{name:<34} {r.field:<8} {_value(r.field, r.a):>13} {_value(r.field, r.b):>13}"
                f" {_value(r.field, r.change, True):>13} {_pct_text(r.change_pct):>8}"
            )
            name = ""
    return "\n".join(lines)


def regressions(agg_a: Figures, agg_b: Figures, metrics: Sequence[str], pct: float) -> list[str]:
    """One line per chosen metric whose time grew by more than pct % from A to B; KeyError names
    a metric neither side has (a typo must not pass a CI silently)."""
    lines = []
    for m in metrics:
        if m not in agg_a and m not in agg_b:
            raise KeyError(m)
        a = agg_a[m]["total_s"] if m in agg_a else 0.0
        b = agg_b[m]["total_s"] if m in agg_b else 0.0
        grew = _pct(a, b)
        if grew > pct:
            lines.append(f"slower: {m} {a:.4g} s -> {b:.4g} s ({_pct_text(grew)} > {pct:g}%)")
    return lines
