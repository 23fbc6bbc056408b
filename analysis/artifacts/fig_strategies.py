"""V1 (C Fig.1): total time and speed-up vs 1 GPU for DDP, DDP-RR and DDP-DS.

The paper printed no numbers for this figure: there is no paper() table and no self-check.
"""

from __future__ import annotations

import pandas as pd

from analysis import common as c
from analysis import steady as st

FIGURE = True
KEYS = ["gpus"]
STRATEGIES = ["ddp", "ddp_rr", "ddp_ds"]
STRATEGY_LABELS = {"ddp": "DDP", "ddp_rr": "DDP-RR", "ddp_ds": "DDP-DS"}


def table(runs: pd.DataFrame, profile: str) -> pd.DataFrame:
    # The 1-GPU cell is one shared run; it stands as the 1-GPU point of every strategy.
    ones = runs[runs["gpus"] == 1]
    rows = [runs[runs["gpus"] > 1]]
    for s in STRATEGIES:
        rows.append(ones.assign(strategy=s))
    df = st.with_steady(pd.concat(rows, ignore_index=True), profile, "total_time_s",
                       "total_time_s")  # fmt: skip
    df = c.speedups(df, by=["strategy"])
    df = c.speedups(df, by=["strategy"], time_col="total_time_s_steady", suffix="_steady")
    df["strategy_order"] = df["strategy"].map(STRATEGIES.index)
    df = df.sort_values(["strategy_order", "gpus"])
    steady = st.steady_cols(df, "total_time_s", "speedup_vs_1gpu", "efficiency_pct")
    return df[["strategy", "gpus", "total_time_s", "speedup_vs_1gpu", "efficiency_pct", *steady,
               "status", "run"]]  # fmt: skip


def compact(t: pd.DataFrame) -> pd.DataFrame:
    """GPUs as rows; each strategy's total time and speed-up over 1 GPU as columns (Fig.1's two
    panels, one line per strategy)."""
    t = t.assign(strategy=t["strategy"].map(STRATEGY_LABELS))
    names = {
        "total_time_s": lambda s: f"{s} [s]",
        "speedup_vs_1gpu": lambda s: f"{s} speed-up",
        "speedup_vs_1gpu_steady": lambda s: f"{s} steady-state speed-up",
    }
    names = {k: v for k, v in names.items() if k in t and t[k].notna().any()}
    return c.wide(t, KEYS, "strategy", names, order=list(STRATEGY_LABELS.values()))


def notes(runs: pd.DataFrame, t: pd.DataFrame) -> list[str]:
    if c.on_gpu(runs):
        return []
    return [
        "CPU run: each rank gets the same compute threads at every rank count "
        "(run/node/threads.py), so n ranks have n times one rank's compute, as n GPUs would, "
        "while the ranks do not outnumber the cores."
    ]
