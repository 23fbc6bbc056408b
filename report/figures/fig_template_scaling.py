"""L6: total tuning time by GPU count, one panel per template, LoRA and DPO."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from analysis import draw as common
from run.llm.catalog import TEMPLATE_LABELS
from run.llm.spec import METHOD_LABELS

TARGET = "fig-template-scaling"
TEMPLATES = list(TEMPLATE_LABELS.values())
METHODS = [METHOD_LABELS[m] for m in ("lora", "dpo")]


def series(df: pd.DataFrame) -> list[str]:
    """The same two methods in every panel, in the paper's order."""
    return METHODS


def draw(df: pd.DataFrame, meta: dict) -> plt.Figure:
    ok = df[df["status"] == "ok"]
    gpus = sorted(df["gpus"].unique())
    # each template on its own y range: DPO takes several times LoRA's time, and a shared axis
    # flattens the cheap templates or clips the dear ones; so every panel carries its own label
    # and the title says the scales differ
    projected = bool(df["epoch_time_projected"].fillna(False).astype(bool).any())
    ylabel = "tuning time, one epoch [s]" + (" (projected)" if projected else "")
    fig, axes = plt.subplots(1, len(TEMPLATES), figsize=(11, 3.6), squeeze=False)
    palette = common.colours(METHODS)
    for ax, t in zip(axes[0], TEMPLATES, strict=True):
        mine = df[df["template"] == t]
        wide = ok[ok["template"] == t].pivot_table(
            index="gpus", columns="method_label", values="tuning_time_s", aggfunc="median"
        )
        wide = wide.reindex(index=gpus, columns=METHODS)
        marks = common.status_marks(mine, "gpus", "method_label").reindex(
            index=gpus, columns=METHODS
        )
        common.bars(ax, wide, palette=palette, marks=marks.fillna("no run"))
        ax.set_title(f"{t} (own y scale)", fontsize=9)
        ax.set_xlabel("GPUs (ranks)")
        ax.set_ylabel(ylabel, fontsize=8)
    common.legend(axes[0, 0], fig=fig)
    runs = common.runs_per_bar(df, ["template", "method_label", "gpus"])
    fig.suptitle(f"Total tuning time by template and method ({runs}; each panel on its own y "
                 f"scale)\n{common.subtitle(meta)}", fontsize=10)  # fmt: skip
    fig.tight_layout()
    return fig


if __name__ == "__main__":
    common.main_for(draw, TARGET)
