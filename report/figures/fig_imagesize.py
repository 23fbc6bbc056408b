"""V2: execution time and efficiency against image size, one line per GPU count."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from report.figures import common

TARGET = "fig-imagesize"


def draw(df: pd.DataFrame, meta: dict) -> plt.Figure:
    df = df[df["status"] == "ok"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.6))
    for g, d in df.groupby("gpus"):
        d = d.sort_values("image_size")
        ax1.plot(d["image_size"], d["total_time_s"], marker="o", label=f"{g} GPU(s)")
        if g > 1:
            ax2.plot(d["image_size"], d["efficiency_pct"], marker="o", label=f"{g} GPU(s)")
    ax2.axhline(100, ls=":", c="grey")
    ax1.set(xlabel="image size [px]", ylabel="execution time [s]")
    ax2.set(xlabel="image size [px]", ylabel="efficiency = speed-up / GPUs [%]")
    ax1.legend()
    ax2.legend()
    fig.suptitle(f"Image size and GPU count (DDP-DS, FP64)\n{common.subtitle(meta)}", fontsize=10)
    return fig


if __name__ == "__main__":
    common.main_for(draw, TARGET)
