"""L1: LoRA s/it and epoch time by dataset and GPU count."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from report.figures import common

TARGET = "fig-datasets"
DATASETS = ["alpaca", "grammar", "samsum", "slimorca"]


def draw(df: pd.DataFrame, meta: dict) -> plt.Figure:
    df = df[df["status"] == "ok"]
    gpus = sorted(df["gpus"].unique())
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
    x = np.arange(len(DATASETS))
    width = 0.8 / max(1, len(gpus))
    projected = bool(df["epoch_time_projected"].fillna(False).astype(bool).any())
    for i, g in enumerate(gpus):
        d = df[df["gpus"] == g].set_index("dataset").reindex(DATASETS)
        pos = x + (i - (len(gpus) - 1) / 2) * width
        ax1.bar(pos, d["s_per_it"], width, label=f"{g} GPU" + ("s" if g > 1 else ""))
        ax2.bar(pos, d["epoch_time_s"], width, label=f"{g} GPU" + ("s" if g > 1 else ""))
    for ax in (ax1, ax2):
        ax.set_xticks(x, DATASETS)
        ax.grid(axis="y", alpha=0.3)
    ax1.set(ylabel="mean iteration time [s/it]", title="iteration time")
    ax2.set(
        ylabel="epoch time [s]" + (" (projected)" if projected else ""),
        title="time for one epoch" + (" = s/it x steps per epoch" if projected else ""),
    )
    ax1.legend(title="GPUs (ranks)")
    fig.suptitle(f"LoRA iteration time by dataset\n{common.subtitle(meta)}", fontsize=10)
    fig.tight_layout()
    return fig


if __name__ == "__main__":
    common.main_for(draw, TARGET)
