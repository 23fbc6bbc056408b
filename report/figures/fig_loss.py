"""V7: training loss (and test accuracy) per epoch by precision, pin_memory off/on."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from report.figures import common

TARGET = "fig-loss"
ORDER = ["fp64", "fp32", "fp16"]


def _label(precision: str, pin: object) -> str:
    return f"{precision.upper()} pin={'on' if str(pin) == 'True' else 'off'}"


def series(df: pd.DataFrame) -> list[str]:
    """Precision x pin_memory, FP64 first (the paper's baseline), pin off before on."""
    keys = df[["precision", "pin_memory"]].drop_duplicates().astype(str)
    rank = keys["precision"].map(lambda p: ORDER.index(p) if p in ORDER else len(ORDER))
    keys = keys.assign(r=rank).sort_values(["r", "precision", "pin_memory"])
    return [_label(p, pin) for p, pin in zip(keys["precision"], keys["pin_memory"], strict=True)]


def draw(df: pd.DataFrame, meta: dict) -> plt.Figure:
    df = df.assign(series=[_label(p, pin) for p, pin in zip(df["precision"], df["pin_memory"],
                                                              strict=True)])  # fmt: skip
    names = series(df)
    pinned = [s for s in names if s.endswith("pin=on")]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.6))
    for ax, col in ((ax1, "train_loss"), (ax2, "test_accuracy_pct")):
        wide = df.pivot_table(index="epoch", columns="series", values=col, aggfunc="median")
        common.lines_or_bars(ax, wide.reindex(columns=names), "epoch", dashed=pinned)
    ax1.set(ylabel="training loss (cross-entropy)")
    ax2.set(ylabel="test accuracy [%]")
    common.legend(ax1, fig=fig)
    fig.suptitle(f"Training loss by precision and pin_memory\n{common.subtitle(meta)}", fontsize=10)
    fig.tight_layout()
    return fig


if __name__ == "__main__":
    common.main_for(draw, TARGET)
