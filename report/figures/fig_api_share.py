"""L7: Share of time in CUDA API calls by template and method."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from report.figures import common
from report.figures.profile_common import metrics_figure

TARGET = "fig-api-share"
CONDITIONS = ["method", "dataset"]


def draw(df: pd.DataFrame, meta: dict) -> plt.Figure:
    return metrics_figure(
        df,
        meta,
        CONDITIONS,
        "Share of time in CUDA API calls by template and method",
        common.subtitle(meta),
    )


if __name__ == "__main__":
    common.main_for(draw, TARGET)
