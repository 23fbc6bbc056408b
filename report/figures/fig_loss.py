"""V7: training loss (and test accuracy) per epoch by precision, pin_memory off/on."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from report.figures import common

TARGET = "fig-loss"
COLORS = {"fp64": "tab:blue", "fp32": "tab:orange", "fp16": "tab:green"}


def draw(df: pd.DataFrame, meta: dict) -> plt.Figure:
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.6))
    for (p, pin), d in df.groupby(["precision", "pin_memory"]):
        d = d.sort_values("epoch")
        style = dict(color=COLORS.get(p), ls="--" if pin else "-", marker="o")
        label = f"{p.upper()} pin={'on' if pin else 'off'}"
        ax1.plot(d["epoch"], d["train_loss"], label=label, **style)
        ax2.plot(d["epoch"], d["test_accuracy_pct"], label=label, **style)
    epochs = sorted(df["epoch"].unique())
    ax1.set(xlabel="epoch", ylabel="training loss", xticks=epochs)
    ax2.set(xlabel="epoch", ylabel="test accuracy [%]", xticks=epochs)
    ax1.legend(fontsize=8)
    fig.suptitle(f"Training loss by precision and pin_memory\n{common.subtitle(meta)}", fontsize=10)
    return fig


if __name__ == "__main__":
    common.main_for(draw, TARGET)
