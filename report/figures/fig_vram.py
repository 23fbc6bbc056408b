"""L8: peak memory by template and GPU count, one panel per method.

On GPUs the bars are peak VRAM per GPU; on CPU they are the peak host RSS of rank 0's process,
and the axis says so.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from analysis import draw as common
from run import store
from run.llm.catalog import TEMPLATE_LABELS
from run.llm.spec import METHOD_LABELS

TARGET = "fig-vram"
TEMPLATES = list(TEMPLATE_LABELS.values())
SHORT = {"Instruct": "Instruct", "Summary": "Summary", "Error Correction": "Error\nCorrection"}
METHODS = list(METHOD_LABELS.values())


def series(df: pd.DataFrame) -> list[str]:
    """One bar per GPU count in each template's group, the same in every panel."""
    return [common.gpus_label(g) for g in sorted(df["gpus"].unique())]


def draw(df: pd.DataFrame, meta: dict) -> plt.Figure:
    # from the table's memory_kind: VRAM only where the peaks were read from the GPU allocator
    host = not df["memory_kind"].dropna().isin(store.GPU_MEMORY).any()
    ylabel = "peak host RSS, rank 0 [GiB]" if host else "peak VRAM per GPU [GiB]"
    fig, axes = plt.subplots(1, len(METHODS), figsize=(12, 3.8), sharey=True)
    names = series(df)
    palette = common.colours(names)
    ok = df[df["status"] == "ok"]

    def cells(w: pd.DataFrame) -> pd.DataFrame:
        return w.rename(columns=common.gpus_label).reindex(index=TEMPLATES, columns=names)

    for ax, m in zip(axes, METHODS, strict=True):
        wide = ok[ok["method_label"] == m].pivot_table(
            index="template", columns="gpus", values="peak_memory_gib", aggfunc="max"
        )
        marks = common.status_marks(df[df["method_label"] == m], "template", "gpus")
        common.bars(ax, cells(wide), palette=palette, marks=cells(marks).fillna("no run"))
        ax.set_xticks(ax.get_xticks(), [SHORT[t] for t in TEMPLATES], fontsize=8)
        ax.set_title(m, fontsize=9)
    axes[0].set_ylabel(ylabel)
    common.legend(axes[0], title="GPUs (ranks)", fig=fig)
    what = "Peak host memory, RSS of rank 0 (no GPU: not VRAM)," if host else "Peak VRAM per GPU"
    fig.suptitle(f"{what} by template, method and GPUs\n{common.subtitle(meta)}", fontsize=10)
    fig.tight_layout()
    return fig


if __name__ == "__main__":
    common.main_for(draw, TARGET)
