"""V5: Profiler metrics by image size, GPUs, pin_memory."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from report.figures import common
from report.figures.profile_common import metrics_figure

TARGET = "fig-vision-metrics"
CONDITIONS = ["image_size", "gpus", "pin_memory"]


def draw(df: pd.DataFrame, meta: dict) -> plt.Figure:
    return metrics_figure(
        df,
        meta,
        CONDITIONS,
        "Profiler metrics by image size, GPUs, pin_memory",
        common.subtitle(meta),
    )


if __name__ == "__main__":
    common.main_for(draw, TARGET)
