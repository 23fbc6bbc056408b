"""V7: training loss (and test accuracy) per epoch by precision, pin_memory off/on.

Where a precision's pinned and unpinned runs gave the same loss and accuracy in every epoch (on
a CPU, where pin_memory is a no-op, they are bit-identical), the pair is one series, named so,
with a note: two identical bars side by side would read as a comparison that found no
difference. A pair that differs keeps both series, the pinned one dashed (hatched)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from analysis import draw as common
from analysis.artifacts.fig_loss import VALUES, identical

TARGET = "fig-loss"
ORDER = ["fp64", "fp32", "fp16"]
SAME = "pin off = on"  # the label's suffix of a pair drawn once


def _pin(pin: object) -> str:
    return "on" if str(pin) == "True" else "off"


def _labels(df: pd.DataFrame) -> pd.Series:
    same = identical(df)
    return pd.Series([f"{str(p).upper()} ({SAME})" if str(p) in same
                      else f"{str(p).upper()} pin={_pin(pin)}"
                      for p, pin in zip(df["precision"], df["pin_memory"], strict=True)],
                     index=df.index)  # fmt: skip


def series(df: pd.DataFrame) -> list[str]:
    """Precision (x pin_memory where the pair differs), FP64 first (the paper's baseline), pin
    off before on."""
    keys = df[["precision", "pin_memory"]].astype(str)
    rank = keys["precision"].map(lambda p: ORDER.index(p) if p in ORDER else len(ORDER))
    order = keys.assign(r=rank).sort_values(["r", "precision", "pin_memory"]).index
    return list(dict.fromkeys(_labels(df).loc[order]))


def draw(df: pd.DataFrame, meta: dict) -> plt.Figure:
    df = df.assign(series=_labels(df))
    names = series(df)
    pinned = [s for s in names if s.endswith("pin=on")]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.6))
    for ax, col in zip((ax1, ax2), VALUES, strict=True):
        # a pair drawn once: both runs hold the same values, their median is either
        wide = df.pivot_table(index="epoch", columns="series", values=col, aggfunc="median")
        common.lines_or_bars(ax, wide.reindex(columns=names), "epoch", dashed=pinned)
    ax1.set(ylabel="training loss (cross-entropy)")
    ax2.set(ylabel="test accuracy [%]")
    common.legend(ax1, fig=fig)
    same = [s for s in names if s.endswith(f"({SAME})")]
    if same:
        no_gpu = bool((meta.get("gates") or {}).get("gpu"))
        why = "pin_memory is a no-op without a GPU, so " if no_gpu else ""
        fig.text(0.01, -0.02, f"{why}pin_memory off and on gave identical losses and accuracies "
                 f"for {', '.join(s.split(' ')[0] for s in same)}: each such pair is drawn once, "
                 f"not as a comparison.", fontsize=7, color="darkred", va="top")  # fmt: skip
        what = "Training loss by precision" + (
            " (pin_memory off and on identical)" if len(same) == len(names) else
            " and pin_memory")  # fmt: skip
    else:
        what = "Training loss by precision and pin_memory"
    fig.suptitle(f"{what}\n{common.subtitle(meta)}", fontsize=10)
    fig.tight_layout()
    return fig


if __name__ == "__main__":
    common.main_for(draw, TARGET)
