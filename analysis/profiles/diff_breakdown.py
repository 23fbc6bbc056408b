"""The time breakdown's side of `cli diff`: one `breakdown:<quantity>` row per quantity.

Where a side's breakdown comes from:
  - profile files (given, or a run folder's traces): breakdown.py's readers, as the CLI runs them;
  - a metrics CSV: the breakdown CSV the CLI writes beside it (breakdown.breakdown_path), if any;
  - a run folder: the breakdown CSV beside its profile_metrics.csv, else its traces.
A side without one is not an error: the diff says so in one line and compares the rest.

A row's total_s is the quantity's seconds summed over the side's ranks and devices (host_blocked
over its ranks), so two jobs are compared per job as the metric rows are; its share is the mean
share of the window over those rows. calls and bytes do not apply. Plain rows, no pandas.
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

from . import detect_source, rank_from_path
from .breakdown import HOST, QUANTITIES, Breakdown, breakdown_path, breakdown_rows, read_breakdown
from .metrics import ProfileError

PREFIX = "breakdown:"
# window is left out: each row's share is already of its window, and a window summed over devices
# and the host row would count one span several times.
ROWS = tuple(PREFIX + q for q in QUANTITIES if q != "window")


class Part(NamedTuple):
    """What the diff needs of one breakdown row (breakdown.COLUMNS)."""

    device: str
    quantity: str
    seconds: float
    share: float


def parts(run: str, rank: int, bd: Breakdown) -> list[Part]:
    """The Parts of one rank's breakdown."""
    return [Part(str(r[3]), r[4], float(r[5]), float(r[6])) for r in breakdown_rows(run, rank, bd)]


def from_files(run: str, files: Sequence[str | os.PathLike[str]]) -> list[Part]:
    """Breakdown Parts of profile files; ProfileError on bad input.

    Ranks come from the file names, else the order: the diff only sums over ranks, so the rank a
    trace records inside (which load_with_breakdown would read the whole metrics for) changes
    nothing.
    """
    out = []
    for i, path in enumerate(files):
        rank = rank_from_path(path)
        out += parts(run, i if rank is None else rank, read_breakdown(path, detect_source(path)))
    return out


def beside(metrics_csv: Path) -> tuple[list[Part] | None, str]:
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


def _part(cells: list[str]) -> Part:
    device, quantity, seconds, share = cells
    return Part(device, quantity, float(seconds) if seconds else math.nan,
                float(share) if share else math.nan)  # fmt: skip


def aggregate(rows: Iterable[Part]) -> dict[str, dict[str, float]]:
    """One entry per ROWS name present: total_s and share (diff_table.FIELDS; calls, bytes NaN)."""
    rows = list(rows)
    out = {}
    for name in ROWS:
        quantity = name.removeprefix(PREFIX)
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
