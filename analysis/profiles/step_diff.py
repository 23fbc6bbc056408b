"""Two run folders' profiles compared for an artifact's table: `cli diff A B` in a few rows.

diff.py's own functions on the two folders, with one difference: no trace is read for the time
breakdown (a table build must not parse an nsys export of gigabytes), so the breakdown rows come
only from the breakdown CSV beside each profile_metrics.csv, where there is one. The rows kept are
the derived totals (paper_total, wall), the breakdown, and the `top` metrics whose time moved
most, every field of each (diff.CSV_COLUMNS).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from run.node import profiling

from . import diff
from . import diff_breakdown as split
from .diff_table import CSV_COLUMNS, DiffRow

TOP = 5
COLUMNS = CSV_COLUMNS


def profiled(run_dir: Path) -> bool:
    """Whether the run left the metrics the sweep collects after a profiled run."""
    return (run_dir / profiling.PROFILE_METRICS).is_file()


def _moved(row: DiffRow) -> float:
    # a metric on one side only moved by all of its time
    if not math.isnan(row.change):
        return abs(row.change)
    return abs(row.b if math.isnan(row.a) else row.a)


def chosen(diff_rows: Sequence[DiffRow], top: int = TOP) -> list[str]:
    """The metrics kept: derived totals and breakdown first, then the `top` largest movers."""
    names = {r.metric for r in diff_rows}
    fixed = [m for m in (diff.PAPER_TOTAL, diff.WALL, *split.ROWS) if m in names]
    moved: dict[str, float] = {}
    for r in diff_rows:
        if r.field == "total_s" and r.metric not in fixed and r.metric not in moved:
            moved[r.metric] = _moved(r)
    movers = sorted((m for m, v in moved.items() if not math.isnan(v) and v > 0),
                    key=lambda m: -moved[m])  # fmt: skip
    return fixed + movers[:top]


def run_diff(a: Path, b: Path, top: int = TOP) -> tuple[pd.DataFrame, str]:
    """(diff rows of the chosen metrics, the line saying a breakdown was not compared or "").

    ProfileError on an unreadable side, diff.UnrelatedError on sides that cannot be compared.
    """
    side_a = diff.read_side(str(a), traces=False)
    side_b = diff.read_side(str(b), traces=False)
    agg_a, agg_b, missing = diff.both_figures(side_a, side_b, (str(a), str(b)))
    rows = diff.compare(agg_a, agg_b)
    keep = chosen(rows, top)
    order = {m: i for i, m in enumerate(keep)}
    kept = sorted((r for r in rows if r.metric in order), key=lambda r: order[r.metric])
    return pd.DataFrame.from_records(kept, columns=COLUMNS), missing or ""
