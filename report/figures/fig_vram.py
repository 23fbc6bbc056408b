"""L8: peak memory by template and GPU count, one panel per method.

On GPUs the bars are peak VRAM per GPU; on CPU they are the peak host RSS of rank 0's process,
and the axis says so.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from report.figures import common

TARGET = "fig-vram"
TEMPLATES = ["Instruct", "Summary", "Error Correction"]
SHORT = {"Instruct": "Instruct", "Summary": "Summary", "Error Correction": "Error\nCorrection"}
METHODS = ["LoRA", "QLoRA", "DPO", "QAT"]


def draw(df: pd.DataFrame, meta: dict) -> plt.Figure:
    gpus = sorted(df["gpus"].unique())
    host = not (df["memory_kind"].dropna() == "gpu_active").any()
    ylabel = "peak host RSS, rank 0 [GiB]" if host else "peak VRAM per GPU [GiB]"
    fig, axes = plt.subplots(1, len(METHODS), figsize=(12, 3.8), sharey=True)
    x = np.arange(len(TEMPLATES))
    width = 0.8 / max(1, len(gpus))
    top = df["peak_memory_gib"].max()
    for ax, m in zip(axes, METHODS, strict=True):
        for i, g in enumerate(gpus):
            d = df[(df["method_label"] == m) & (df["gpus"] == g)].set_index("template")
            d = d.reindex(TEMPLATES)
            pos = x + (i - (len(gpus) - 1) / 2) * width
            ax.bar(
                pos,
                d["peak_memory_gib"].fillna(0),
                width,
                label=f"{g} GPU" + ("s" if g > 1 else ""),
            )
            for p, st in zip(pos, d["status"], strict=True):
                if isinstance(st, str) and st != "ok":
                    ax.text(
                        p,
                        0.02 * top,
                        "n/a" if st == "unsupported" else st,
                        rotation=90,
                        ha="center",
                        va="bottom",
                        fontsize=7,
                        color="dimgrey",
                    )
        ax.set_xticks(x, [SHORT[t] for t in TEMPLATES], fontsize=8)
        ax.set_title(m)
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel(ylabel)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, title="GPUs (ranks)", loc="center right", fontsize=8)
    what = "Peak host memory (CPU run: not VRAM)" if host else "Peak VRAM per GPU"
    fig.suptitle(f"{what} by template, method and GPUs\n{common.subtitle(meta)}", fontsize=10)
    fig.tight_layout(rect=(0, 0, 0.93, 1))
    return fig


if __name__ == "__main__":
    common.main_for(draw, TARGET)
