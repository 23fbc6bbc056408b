"""Drawing shared by the profiler figures (V5, L3, L4, L7, L9): grouped bars per metric.

The artifact CSVs (analysis/profiles/artifact.py) hold the paper's metrics ("paper metric" rows,
measured or not), kernel launches over all launch APIs ("extra metric", drawn beside
cudaLaunchKernel) and labelled CPU stand-ins ("cpu op" rows). A figure shows the paper's metrics
when the profile measured them (a measured 0 is a run that did not call it); otherwise it says
so on the figure and shows the CPU stand-ins in a panel titled as such, never as zeros of the
paper's metrics. Metrics the profiler could not record are named under the figure.
"""

from __future__ import annotations

import textwrap

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from analysis.profiles.artifact import CPU, EXTRA, PAPER
from analysis.profiles.coverage import NOT_MEASURED

__all__ = ["NOT_MEASURED", "condition_label", "grouped_bars", "metrics_figure"]
LEGEND_WIDTH = 42  # characters per legend line: the all-API launch label is long


def condition_label(df: pd.DataFrame, conditions: list[str]) -> pd.Series:
    def one(r: pd.Series) -> str:
        parts = []
        for k in conditions:
            v = r[k]
            if k == "pin_memory":
                parts.append("pin" if str(v) == "True" else "nopin")
            elif k == "gpus":
                parts.append(f"{v} GPU")
            elif k == "image_size":
                parts.append(f"{v} px")
            else:
                parts.append(str(v))
        return "\n".join(parts)

    return df.apply(one, axis=1)


def grouped_bars(ax: plt.Axes, df: pd.DataFrame, col: str, ylabel: str, log: bool = False) -> None:
    """x: condition label (in table order); one bar per metric label."""
    conds = list(dict.fromkeys(df["cond"]))
    labels = list(dict.fromkeys(df["label"]))
    width = 0.8 / max(len(labels), 1)
    x = np.arange(len(conds))
    for i, label in enumerate(labels):
        d = df[df["label"] == label].set_index("cond")[col]
        y = np.array([float(d.get(cnd, np.nan)) if cnd in d.index else np.nan for cnd in conds])
        if log:  # a measured 0 has no place on a log axis; it shows as no bar
            y = np.where(y > 0, y, np.nan)
        ax.bar(x + (i - (len(labels) - 1) / 2) * width, y, width, label=label)
    ax.set_xticks(x, conds, fontsize=7)
    ax.set_ylabel(ylabel)
    if log:
        ax.set_yscale("log")
    ax.grid(axis="y", alpha=0.3)


def metrics_figure(
    df: pd.DataFrame, meta: dict, conditions: list[str], title: str, subtitle: str
) -> plt.Figure:
    """Share (%) and seconds per metric; paper metrics if measured, else CPU stand-ins."""
    df = df[df["status"] == "ok"].copy()
    df["cond"] = condition_label(df, conditions)
    measured = df["measured"].astype(str) == "True"
    paper = df[(df["kind"] == PAPER) & measured]
    # the all-API launch count is drawn beside cudaLaunchKernel, only when the paper's are
    shown_rows = df[df["kind"].isin([PAPER, EXTRA]) & measured]
    shown, what = (shown_rows, "paper's metrics") if len(paper) else (df[df["kind"] == CPU], "")
    if len(paper) and (shown["kind"] == EXTRA).any():
        what += " and kernel launches through all APIs (not the paper's)"
    shown = shown.assign(label=shown["label"].astype(str).map(_wrap))
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.2))
    if shown.empty:
        for ax in (ax1, ax2):
            ax.text(0.5, 0.5, "no profiled run", ha="center", va="center", transform=ax.transAxes)
    else:
        grouped_bars(ax1, shown, "share_pct", "share of profiled time [%]")
        grouped_bars(ax2, shown, "total_s", "time in window, summed over ranks [s]", log=True)
        ax2.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    if not len(paper):
        what = "CPU stand-ins (inclusive CPU-op time)"
        missing = sorted(set(df.loc[df["kind"] == PAPER, "label"]))
        fig.text(0.01, -0.04, f"Paper's metrics {NOT_MEASURED}: " + ", ".join(missing),
                 fontsize=8, color="darkred", wrap=True)  # fmt: skip
    else:
        # a GPU profile may still lack a metric its profiler cannot record (cudaEventDestroy
        # under torch.profiler): name it and why, rather than leave a silent gap
        gaps = df[(df["kind"] == PAPER) & ~measured & ~df["metric"].isin(set(paper["metric"]))]
        by_note = gaps.groupby("note", sort=True)["label"].unique()
        if len(by_note):
            text = "; ".join(f"{', '.join(sorted(ls))}: {note}" for note, ls in by_note.items())
            fig.text(0.01, -0.04, text, fontsize=8, color="darkred", wrap=True)
    ax1.set_title(what, fontsize=9)
    fig.suptitle(f"{title}\n{subtitle}", fontsize=10, y=1.04)
    return fig


def _wrap(label: str) -> str:
    return textwrap.fill(label, LEGEND_WIDTH)
