"""V2: execution time and efficiency against image size, one series per GPU count."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from analysis import draw as common

TARGET = "fig-imagesize"


def series(df: pd.DataFrame) -> list[str]:
    """The GPU counts of the time panel (the efficiency panel has those above 1)."""
    return [common.gpus_label(g) for g in sorted(df.loc[df["status"] == "ok", "gpus"].unique())]


def _wide(df: pd.DataFrame, col: str) -> pd.DataFrame:
    w = df.pivot_table(index="image_size", columns="gpus", values=col, aggfunc="median")
    return w.rename(columns=common.gpus_label)


def draw(df: pd.DataFrame, meta: dict) -> plt.Figure:
    df = df[df["status"] == "ok"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.6))
    palette = common.lines_or_bars(ax1, _wide(df, "total_time_s"), "image size [px]")
    multi = df[df["gpus"] > 1]
    if len(multi):  # a GPU count keeps its colour in both panels
        common.lines_or_bars(ax2, _wide(multi, "efficiency_pct"), "image size [px]", palette)
    ax2.axhline(100, ls=":", c="grey")
    ax2.text(0.99, 100, "ideal ", ha="right", va="bottom", fontsize=7, color="grey",
             transform=ax2.get_yaxis_transform())  # fmt: skip
    # both axes from zero: a range cut to its data makes a few points look like a steep trend
    ax1.set_ylim(0, ax1.get_ylim()[1])
    ax2.set_ylim(0, max(ax2.get_ylim()[1], 110))
    ax1.set(ylabel="execution time [s]")
    ax2.set(xlabel="image size [px]", ylabel="efficiency = speed-up / GPUs [%]")
    common.legend(ax1, title="GPUs (ranks)", fig=fig)
    runs = common.runs_per_bar(df, ["image_size", "gpus"]).replace("each", "per point")
    fig.suptitle(f"Image size and GPU count (DDP-DS, FP64; {runs})\n{common.subtitle(meta)}",
                 fontsize=10)  # fmt: skip
    fig.tight_layout()
    return fig


if __name__ == "__main__":
    common.main_for(draw, TARGET)
