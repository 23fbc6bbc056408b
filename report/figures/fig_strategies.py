"""V1: total time and speed-up by strategy and GPU count."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from report.figures import common

TARGET = "fig-strategies"
LABELS = {"ddp": "DDP", "ddp_rr": "DDP-RR", "ddp_ds": "DDP-DS"}


def draw(df: pd.DataFrame, meta: dict) -> plt.Figure:
    df = df[df["status"] == "ok"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.6))
    for s, label in LABELS.items():
        d = df[df["strategy"] == s].sort_values("gpus")
        ax1.plot(d["gpus"], d["total_time_s"], marker="o", label=label)
        ax2.plot(d["gpus"], d["speedup_vs_1gpu"], marker="o", label=label)
    gpus = sorted(df["gpus"].unique())
    ax2.plot(gpus, gpus, ls=":", c="grey", label="ideal")
    ax1.set(xlabel="GPUs (ranks)", ylabel="total time [s]", xticks=gpus)
    ax2.set(xlabel="GPUs (ranks)", ylabel="speed-up vs 1 GPU", xticks=gpus)
    ax2.legend()
    fig.suptitle(f"Workload distribution strategies\n{common.subtitle(meta)}", fontsize=10)
    return fig


if __name__ == "__main__":
    common.main_for(draw, TARGET)
