"""V11: Scenario B DataLoader total time with NUMA binding off and on, by GPU count."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from report.figures import common

TARGET = "fig-numa"


def draw(df: pd.DataFrame, meta: dict) -> plt.Figure:
    fig, ax = plt.subplots(figsize=(6, 3.6))
    common.time_bars(ax, df, "binding")
    fig.suptitle(f"NUMA binding of DataLoader ranks\n{common.subtitle(meta)}", fontsize=10)
    return fig


if __name__ == "__main__":
    common.main_for(draw, TARGET)
