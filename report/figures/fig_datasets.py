"""L1: LoRA s/it and epoch time by dataset and GPU count."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from analysis import draw as common
from run.llm import catalog

TARGET = "fig-datasets"
DATASETS = list(catalog.DATASETS)


def series(df: pd.DataFrame) -> list[str]:
    """One bar per GPU count in each dataset's group (the same in both panels)."""
    return [common.gpus_label(g) for g in sorted(df.loc[df["status"] == "ok", "gpus"].unique())]


def _wide(df: pd.DataFrame, col: str) -> pd.DataFrame:
    w = df.pivot_table(index="dataset", columns="gpus", values=col, aggfunc="median")
    w = w.reindex([d for d in DATASETS if d in w.index] + [d for d in w.index if d not in DATASETS])
    return w.rename(columns=common.gpus_label)


def draw(df: pd.DataFrame, meta: dict) -> plt.Figure:
    df = df[df["status"] == "ok"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
    projected = bool(df["epoch_time_projected"].fillna(False).astype(bool).any())
    palette = common.bars(ax1, _wide(df, "s_per_it"))
    common.bars(ax2, _wide(df, "epoch_time_s"), palette=palette)
    ax1.set(ylabel="mean iteration time [s/it]")
    ax1.set_title("iteration time", fontsize=9)
    ax2.set(ylabel="epoch time [s]" + (" (projected)" if projected else ""))
    ax2.set_title("one epoch" + (" = s/it x steps per epoch" if projected else ""), fontsize=9)
    common.legend(ax1, title="GPUs (ranks)", fig=fig)
    runs = common.runs_per_bar(df, ["dataset", "gpus"])
    fig.suptitle(f"LoRA iteration time by dataset ({runs})\n{common.subtitle(meta)}", fontsize=10)
    fig.tight_layout()
    return fig


if __name__ == "__main__":
    common.main_for(draw, TARGET)
