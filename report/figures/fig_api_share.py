"""L7: Share of time in CUDA API calls (CPU ops on a CPU run) by template and method."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from analysis import draw as common
from analysis import draw_profile as profile_common

TARGET = "fig-api-share"
CONDITIONS = ["method", "dataset"]
# {what}: what the profile recorded (CUDA API calls, or CPU ops on a CPU run), from the table
TITLE = "Share of time in {what}, by template and method"


def series(df: pd.DataFrame) -> list[str]:
    return profile_common.series(df, CONDITIONS)


def draw(df: pd.DataFrame, meta: dict) -> plt.Figure:
    return profile_common.metrics_figure(df, meta, CONDITIONS, TITLE, common.subtitle(meta))


if __name__ == "__main__":
    common.main_for(draw, TARGET)
