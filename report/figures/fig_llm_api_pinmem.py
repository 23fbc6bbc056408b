"""L4: Profiler metrics by pin_memory (LoRA, alpaca)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from report.figures import common
from report.figures.profile_common import metrics_figure

TARGET = "fig-llm-api-pinmem"
CONDITIONS = ["gpus", "pin_memory"]


def draw(df: pd.DataFrame, meta: dict) -> plt.Figure:
    return metrics_figure(
        df, meta, CONDITIONS, "Profiler metrics by pin_memory (LoRA, alpaca)", common.subtitle(meta)
    )


if __name__ == "__main__":
    common.main_for(draw, TARGET)
