"""V2 (C Fig.2, J Fig.2): execution time and efficiency against image size and GPU count.

The paper printed no numbers for this figure: there is no paper() table and no self-check.
"""

from __future__ import annotations

import pandas as pd

from analysis import common as c
from analysis import steady as st

FIGURE = True
KEYS = ["image_size"]


def table(runs: pd.DataFrame, profile: str) -> pd.DataFrame:
    df = st.with_steady(runs, profile, "total_time_s", "total_time_s")
    df = c.speedups(df, by=["image_size"])
    df = c.speedups(df, by=["image_size"], time_col="total_time_s_steady", suffix="_steady")
    df = df.sort_values(["image_size", "gpus"])
    steady = st.steady_cols(df, "total_time_s", "speedup_vs_1gpu", "efficiency_pct")
    return df[["image_size", "gpus", "total_time_s", "speedup_vs_1gpu", "efficiency_pct", *steady,
               "status", "run"]]  # fmt: skip


def _gpus(g: float) -> str:
    return f"{int(g)} GPU{'s' if int(g) > 1 else ''}"


def compact(t: pd.DataFrame) -> pd.DataFrame:
    """Image size as rows; the execution time per GPU count, then the efficiency (speed-up /
    GPUs) per GPU count above 1, as columns (Fig.2's two panels, one line per GPU count)."""
    names = {
        "total_time_s": lambda g: f"{_gpus(g)} [s]",
        "efficiency_pct": lambda g: f"{_gpus(g)} efficiency [%]" if g > 1 else None,
        "efficiency_pct_steady": lambda g: (
            f"{_gpus(g)} steady-state efficiency [%]" if g > 1 else None
        ),
    }
    names = {k: v for k, v in names.items() if k in t and t[k].notna().any()}
    return c.wide(t, KEYS, "gpus", names)
