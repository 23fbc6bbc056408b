"""V11: Scenario B DataLoader total time with NUMA binding off and on, by GPU count."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from analysis import draw as common

TARGET = "fig-numa"
BY = "binding"  # the series: one bar per value in each GPU-count group


def series(df: pd.DataFrame) -> list[str]:
    return common.bar_series(df, BY)


def draw(df: pd.DataFrame, meta: dict) -> plt.Figure:
    fig, ax = plt.subplots(figsize=(6, 3.6))
    drawn = common.time_bars(ax, df, BY)
    why = (meta.get("gates") or {}).get("multi_numa", "")
    if len(drawn) < 2 or why:  # one bar per group is no comparison: say why the other is absent
        ax.set_title(f"binding not compared: {why or 'one binding only'}", fontsize=8,
                     color="darkred")  # fmt: skip
    runs = common.runs_per_bar(df, [BY, "gpus"])
    fig.suptitle(f"NUMA binding of DataLoader ranks ({runs})\n{common.subtitle(meta)}",
                 fontsize=10)  # fmt: skip
    fig.tight_layout()
    return fig


if __name__ == "__main__":
    common.main_for(draw, TARGET)
