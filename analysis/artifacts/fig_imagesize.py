"""V2 (C Fig.2, J Fig.2): execution time and efficiency against image size and GPU count (no
paper numbers: no paper() table, no self-check)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from analysis import common as c
from analysis import draw
from analysis import steady as st
from analysis.driver import Artifact

KEYS = ["image_size"]


def table(runs: pd.DataFrame, scale: str) -> pd.DataFrame:
    df = st.with_steady(runs, scale, "total_time_s", "total_time_s")
    df = c.speedups(df, by=["image_size"])
    df = c.speedups(df, by=["image_size"], time_col="total_time_s_steady", suffix="_steady")
    df = df.sort_values(["image_size", "gpus"])
    steady = st.steady_cols(df, "total_time_s", "speedup_vs_1gpu", "efficiency_pct")
    return df[["image_size", "gpus", "total_time_s", "speedup_vs_1gpu", "efficiency_pct", *steady,
               "status", "run"]]  # fmt: skip


def compact(t: pd.DataFrame) -> pd.DataFrame:
    """Image size as rows; the execution time per GPU count, then the efficiency (speed-up /
    GPUs) per GPU count above 1, as columns (Fig.2's two panels, one line per GPU count)."""
    names = {
        "total_time_s": lambda g: f"{c.gpus_label(g)} [s]",
        "efficiency_pct": lambda g: f"{c.gpus_label(g)} efficiency [%]" if g > 1 else None,
        "efficiency_pct_steady": lambda g: (
            f"{c.gpus_label(g)} steady-state efficiency [%]" if g > 1 else None
        ),
    }
    names = {k: v for k, v in names.items() if k in t and t[k].notna().any()}
    return c.pivot(t, KEYS, "gpus", names)


def _wide(df: pd.DataFrame, col: str) -> pd.DataFrame:
    w = df.pivot_table(index="image_size", columns="gpus", values=col, aggfunc="median")
    return w.rename(columns=draw.gpus_label)


def figure(df: pd.DataFrame, meta: dict) -> plt.Figure:
    df = df[df["status"] == "ok"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.6))
    palette = draw.lines_or_bars(ax1, _wide(df, "total_time_s"), "image size [px]")
    multi = df[df["gpus"] > 1]
    if len(multi):  # a GPU count keeps its colour in both panels
        draw.lines_or_bars(ax2, _wide(multi, "efficiency_pct"), "image size [px]", palette)
    ax2.axhline(100, ls=":", c="grey")
    ax2.text(0.99, 100, "ideal ", ha="right", va="bottom", fontsize=7, color="grey",
             transform=ax2.get_yaxis_transform())  # fmt: skip
    # both axes from zero: a range cut to its data makes a few points look like a steep trend
    ax1.set_ylim(0, ax1.get_ylim()[1])
    ax2.set_ylim(0, max(ax2.get_ylim()[1], 110))
    ax1.set(ylabel="execution time [s]")
    ax2.set(xlabel="image size [px]", ylabel="efficiency = speed-up / GPUs [%]")
    draw.legend(ax1, title="GPUs (ranks)", fig=fig)
    runs = draw.runs_per_bar(df, ["image_size", "gpus"]).replace("each", "per point")
    fig.suptitle(f"Image size and GPU count (DDP-DS, FP64; {runs})\n{draw.subtitle(meta)}",
                 fontsize=10)  # fmt: skip
    fig.tight_layout()
    return fig


ARTIFACT = Artifact(table=table, compact=compact, keys=KEYS, figure=figure)
