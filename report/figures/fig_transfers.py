"""L9: bytes moved per direction (HtoD, DtoD, DtoH) by template and method."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from report.figures import common
from report.figures.profile_common import NOT_MEASURED, condition_label, grouped_bars

TARGET = "fig-transfers"
CONDITIONS = ["method", "dataset"]


def draw(df: pd.DataFrame, meta: dict) -> plt.Figure:
    df = df[df["status"] == "ok"].copy()
    df["cond"] = condition_label(df, CONDITIONS)
    paper = df[(df["kind"] == "paper metric") & (df["measured"].astype(str) == "True")]
    fig, ax = plt.subplots(figsize=(10, 4))
    if len(paper):
        paper = paper.assign(mb=paper["bytes"].astype(float) / 1e6)
        grouped_bars(ax, paper, "mb", "bytes moved in the window [MB]", log=True)
        ax.legend(fontsize=8)
    else:
        cpu = df[df["kind"] == "cpu op"]
        cpu = cpu[cpu["label"].str.startswith("aten::copy_")]
        if len(cpu):
            grouped_bars(ax, cpu, "total_s", "aten::copy_ time, summed over ranks [s]")
            ax.set_title("CPU stand-in: host copies (time, not bytes)", fontsize=9)
        ax.text(0.5, 0.9, f"bytes per direction: {NOT_MEASURED} (no CUDA memcpy on a CPU)",
                ha="center", transform=ax.transAxes, color="darkred", fontsize=9)  # fmt: skip
    fig.suptitle(f"Bytes moved per direction\n{common.subtitle(meta)}", fontsize=10)
    return fig


if __name__ == "__main__":
    common.main_for(draw, TARGET)
