"""V5: Profiler metrics by image size, GPUs, pin_memory."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from analysis import draw as common
from analysis import draw_profile as profile_common

TARGET = "fig-vision-metrics"
CONDITIONS = ["image_size", "gpus", "pin_memory"]
# {what}: what the profile recorded (CUDA API calls, or CPU ops on a CPU run), from the table
TITLE = "Time in {what}, by image size, GPUs and pin_memory"


def series(df: pd.DataFrame) -> list[str]:
    return profile_common.series(df, CONDITIONS)


def draw(df: pd.DataFrame, meta: dict) -> plt.Figure:
    return profile_common.metrics_figure(df, meta, CONDITIONS, TITLE, common.subtitle(meta))


if __name__ == "__main__":
    common.main_for(draw, TARGET)
