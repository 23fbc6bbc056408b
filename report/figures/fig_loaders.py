"""V8: Scenario B total time, DataLoader against DALI, by GPU count."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from analysis import draw as common

TARGET = "fig-loaders"
BY = "loader_label"  # the series: one bar per value in each GPU-count group


def series(df: pd.DataFrame) -> list[str]:
    return common.bar_series(df, BY)


def draw(df: pd.DataFrame, meta: dict) -> plt.Figure:
    fig, ax = plt.subplots(figsize=(6, 3.6))
    common.time_bars(ax, df, BY)
    runs = common.runs_per_bar(df, [BY, "gpus"])
    fig.suptitle(f"DataLoader against DALI (Scenario B; {runs}){common.dali_on_cpu(meta)}\n"
                 f"{common.subtitle(meta)}", fontsize=10)  # fmt: skip
    fig.tight_layout()  # the title's lines above the axes, not over them
    return fig


if __name__ == "__main__":
    common.main_for(draw, TARGET)
