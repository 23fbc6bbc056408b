"""L3: Profiler metrics by dataset (LoRA, 1 GPU)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from report.figures import common
from report.figures.profile_common import metrics_figure

TARGET = "fig-llm-api"
CONDITIONS = ["dataset"]


def draw(df: pd.DataFrame, meta: dict) -> plt.Figure:
    return metrics_figure(
        df, meta, CONDITIONS, "Profiler metrics by dataset (LoRA, 1 GPU)", common.subtitle(meta)
    )


if __name__ == "__main__":
    common.main_for(draw, TARGET)
