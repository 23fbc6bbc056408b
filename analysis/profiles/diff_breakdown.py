"""The time breakdown's side of `cli diff`: one `breakdown:<quantity>` row per quantity.

Where a side's breakdown comes from:
  - profile files (given, or a run folder's traces): breakdown.py's readers, as the CLI runs them;
  - a metrics CSV: the breakdown CSV the CLI writes beside it (breakdown.breakdown_path), if any;
  - a run folder: the breakdown CSV beside its profile_metrics.csv, else its traces.
A side without one is not an error: the diff says so in one line and compares the rest.

A row's total_s is the quantity's seconds summed over the side's ranks and devices (host_blocked
over its ranks), so two jobs are compared per job as the metric rows are; its share is the mean
share of the window over those rows. calls and bytes do not apply.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from . import detect_source, rank_from_path
from .breakdown import COLUMNS, HOST, QUANTITIES, breakdown_frame, breakdown_path, read_breakdown
from .metrics import ProfileError

PREFIX = "breakdown:"
# window is left out: each row's share is already of its window, and a window summed over devices
# and the host row would count one span several times.
ROWS = tuple(PREFIX + q for q in QUANTITIES if q != "window")


def from_files(run: str, files: Sequence[str | os.PathLike[str]]) -> pd.DataFrame:
    """Breakdown rows (breakdown.COLUMNS) of profile files; ProfileError on bad input.

    Ranks come from the file names, else the order: the diff only sums over ranks, so the rank a
    trace records inside (which load_profiles would read the whole metrics for) changes nothing.
    """
    frames = []
    for i, path in enumerate(files):
        rank = rank_from_path(path)
        source = detect_source(path)
        frames.append(
            breakdown_frame(run, i if rank is None else rank, read_breakdown(path, source))
        )
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS)


def beside(metrics_csv: Path) -> tuple[pd.DataFrame | None, str]:
    """The breakdown CSV beside a metrics CSV, or (None, why there is none)."""
    path = breakdown_path(metrics_csv)
    if not path.is_file():
        return None, f"{metrics_csv} has no {path.name} beside it"
    try:
        df = pd.read_csv(path)
    except OSError as exc:
        raise ProfileError(path, f"cannot read file ({exc.strerror or exc})") from exc
    except ValueError as exc:
        raise ProfileError(path, f"not a breakdown CSV ({str(exc).splitlines()[0]})") from exc
    missing = [c for c in ("device", "quantity", "seconds", "share_of_window") if c not in df]
    if missing:
        raise ProfileError(path, f"not a breakdown CSV (no column {', '.join(missing)})")
    return df, ""


def aggregate(df: pd.DataFrame) -> pd.DataFrame:
    """One row per ROWS name present (index metric; columns calls, total_s, bytes, share)."""
    records = {}
    for name in ROWS:
        quantity = name.removeprefix(PREFIX)
        host = quantity == "host_blocked"
        rows = df[(df["quantity"] == quantity) & ((df["device"].astype(str) == HOST) == host)]
        if len(rows):
            share = rows["share_of_window"].astype("float64")
            mean = float(share.mean()) if share.notna().any() else math.nan
            records[name] = [math.nan, float(rows["seconds"].sum()), math.nan, mean]
    return pd.DataFrame.from_dict(
        records, orient="index", columns=["calls", "total_s", "bytes", "share"], dtype="float64"
    )


def missing_line(why_a: str | None, why_b: str | None) -> str | None:
    """The one line saying which side has no breakdown (None when both have one)."""
    if why_a is None and why_b is None:
        return None
    if why_a is not None and why_b is not None:
        return f"breakdown: not compared, neither side has one (A: {why_a}; B: {why_b})"
    label, why = ("A", why_a) if why_a is not None else ("B", why_b)
    return f"breakdown: not compared, {label} has none ({why})"
