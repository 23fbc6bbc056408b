"""Two run folders' profiles compared for an artifact's table: `cli diff A B` in a few rows.

diff.py's own functions on the two folders, with one difference: no trace is read for the time
breakdown (a table build must not parse an nsys export of gigabytes), so the breakdown rows come
only from the breakdown CSV beside each profile_metrics.csv, where there is one. The rows kept are
the derived totals (paper_total, wall), the breakdown, and the `top` metrics whose time moved
most, every field of each (diff.CSV_COLUMNS).
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from run.node import profiling

from . import diff
from . import diff_breakdown as split

TOP = 5
COLUMNS = diff.CSV_COLUMNS


def profiled(run_dir: Path) -> bool:
    """Whether the run left the metrics the sweep collects after a profiled run."""
    return (run_dir / profiling.PROFILE_METRICS).is_file()


def _moved(rows: pd.DataFrame) -> float:
    # a metric on one side only moved by all of its time
    a, b, change = rows.iloc[0][["a", "b", "change"]]
    if not math.isnan(change):
        return abs(change)
    return abs(b if math.isnan(a) else a)


def chosen(diff_rows: pd.DataFrame, top: int = TOP) -> list[str]:
    """The metrics kept: derived totals and breakdown first, then the `top` largest movers."""
    fixed = [m for m in (diff.PAPER_TOTAL, diff.WALL, *split.ROWS) if m in set(diff_rows["metric"])]
    times = diff_rows[(diff_rows["field"] == "total_s") & ~diff_rows["metric"].isin(fixed)]
    moved = {m: _moved(g) for m, g in times.groupby("metric", sort=False)}
    movers = sorted((m for m, v in moved.items() if not math.isnan(v) and v > 0),
                    key=lambda m: -moved[m])  # fmt: skip
    return fixed + movers[:top]


def run_diff(a: Path, b: Path, top: int = TOP) -> tuple[pd.DataFrame, str]:
    """(diff rows of the chosen metrics, the line saying a breakdown was not compared or "").

    ProfileError on an unreadable side, diff.UnrelatedError on sides that cannot be compared.
    """
    table_a, split_a, why_a = diff.read_side(str(a), traces=False)
    table_b, split_b, why_b = diff.read_side(str(b), traces=False)
    diff.check_related(table_a, table_b, (str(a), str(b)), mixed=False)
    agg_a, agg_b = diff.aggregate(table_a), diff.aggregate(table_b)
    missing = split.missing_line(None if split_a is not None else why_a,
                                 None if split_b is not None else why_b)  # fmt: skip
    if missing is None:
        agg_a = pd.concat([agg_a, split.aggregate(split_a)])
        agg_b = pd.concat([agg_b, split.aggregate(split_b)])
    rows = diff.compare(agg_a, agg_b)
    keep = chosen(rows, top)
    rows = rows[rows["metric"].isin(keep)]
    order = {m: i for i, m in enumerate(keep)}
    rows = rows.sort_values("metric", key=lambda s: s.map(order), kind="stable")
    return rows.reset_index(drop=True), missing or ""
