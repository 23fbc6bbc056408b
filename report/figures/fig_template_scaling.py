"""L6: total tuning time by GPU count, one panel per template, LoRA and DPO."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from report.figures import common

TARGET = "fig-template-scaling"
TEMPLATES = ["Instruct", "Summary", "Error Correction"]
METHODS = {"LoRA": "tab:blue", "DPO": "tab:green"}


def draw(df: pd.DataFrame, meta: dict) -> plt.Figure:
    df = df[df["status"] == "ok"]
    gpus = sorted(df["gpus"].unique())
    fig, axes = plt.subplots(1, len(TEMPLATES), figsize=(11, 3.6), sharey=True)
    for ax, t in zip(np.atleast_1d(axes), TEMPLATES, strict=True):
        for m, colour in METHODS.items():
            d = df[(df["template"] == t) & (df["method_label"] == m)].sort_values("gpus")
            ax.plot(d["gpus"], d["tuning_time_s"], marker="o", label=m, color=colour)
        ax.set(title=t, xlabel="GPUs (ranks)", xticks=gpus)
        ax.grid(alpha=0.3)
        ax.set_ylim(bottom=0)
    projected = bool(df["epoch_time_projected"].fillna(False).astype(bool).any())
    np.atleast_1d(axes)[0].set_ylabel(
        "tuning time, one epoch [s]" + (" (proj.)" if projected else "")
    )
    np.atleast_1d(axes)[0].legend()
    fig.suptitle(f"Total tuning time by template and method\n{common.subtitle(meta)}", fontsize=10)
    fig.tight_layout()
    return fig


if __name__ == "__main__":
    common.main_for(draw, TARGET)
