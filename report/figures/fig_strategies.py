"""V1: total time and speed-up by strategy and GPU count."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from report.figures import common

TARGET = "fig-strategies"
LABELS = {"ddp": "DDP", "ddp_rr": "DDP-RR", "ddp_ds": "DDP-DS"}


def series(df: pd.DataFrame) -> list[str]:
    """The strategies drawn, in the paper's order (the same bars in both panels)."""
    have = set(df.loc[df["status"] == "ok", "strategy"])
    return [label for s, label in LABELS.items() if s in have]


def _wide(df: pd.DataFrame, col: str) -> pd.DataFrame:
    w = df.pivot_table(index="gpus", columns="strategy", values=col, aggfunc="median")
    return w.reindex(columns=[s for s in LABELS if s in w.columns]).rename(columns=LABELS)


def draw(df: pd.DataFrame, meta: dict) -> plt.Figure:
    df = df[df["status"] == "ok"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.6))
    # GPU counts are categories (1, 2, 4, 8), not a continuum: grouped bars, not lines
    common.bars(ax1, _wide(df, "total_time_s"))
    speed = _wide(df, "speedup_vs_1gpu")
    common.bars(ax2, speed)
    for i, g in enumerate(speed.index):  # the ideal speed-up is the GPU count: a mark per group
        ax2.hlines(g, i - 0.45, i + 0.45, colors="black", linestyles=":",
                   label="ideal (= GPUs)" if i == 0 else None)  # fmt: skip
    ax1.set(xlabel="GPUs (ranks)", ylabel="total time [s]")
    ax2.set(xlabel="GPUs (ranks)", ylabel="speed-up over 1 GPU [x]")
    common.legend(ax2, fig=fig)
    fig.suptitle(f"Workload distribution strategies\n{common.subtitle(meta)}", fontsize=10)
    fig.tight_layout()
    return fig


if __name__ == "__main__":
    common.main_for(draw, TARGET)
