"""V1: total time and speed-up by strategy and GPU count.

On one GPU the strategies do the same work and share one run (analysis/common.py speedups): that
run is one bar, not three identical ones that would read as a comparison, and the speed-up panel
leaves out the 1-GPU group, whose x1.0 is its definition."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from analysis import draw as common
from run.vision.spec import STRATEGY_LABELS as LABELS

TARGET = "fig-strategies"
SHARED = "one run for all (1 rank: same work)"  # a GPU count whose strategies share one run
SHARED_COLOUR = "tab:gray"


def shared_gpus(df: pd.DataFrame) -> list[int]:
    """The GPU counts where every strategy's row is the same run (1 GPU: one rank, the same
    work under every strategy)."""
    ok = df[df["status"] == "ok"]
    if ok["strategy"].nunique() < 2:
        return []
    runs = ok.groupby("gpus")["run"].nunique()
    return sorted(int(g) for g in runs[runs == 1].index)


def series(df: pd.DataFrame) -> list[str]:
    """The strategies drawn, in the paper's order (the same bars in both panels), and the
    shared run where a GPU count has one."""
    have = set(df.loc[df["status"] == "ok", "strategy"])
    return [label for s, label in LABELS.items() if s in have] + (
        [SHARED] if shared_gpus(df) else []
    )


def _wide(df: pd.DataFrame, col: str) -> pd.DataFrame:
    w = df.pivot_table(index="gpus", columns="strategy", values=col, aggfunc="median")
    return w.reindex(columns=[s for s in LABELS if s in w.columns]).rename(columns=LABELS)


def draw(df: pd.DataFrame, meta: dict) -> plt.Figure:
    df = df[df["status"] == "ok"]
    shared = shared_gpus(df)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.6))
    # GPU counts are categories (1, 2, 4, 8), not a continuum: grouped bars, not lines
    times = _wide(df, "total_time_s")
    own = times.copy()
    own.loc[own.index.isin(shared)] = float("nan")  # drawn once, below
    palette = common.bars(ax1, own)
    for i, g in enumerate(times.index):
        if g in shared:  # one run: one bar across the group
            ax1.bar(i, times.loc[g].dropna().iloc[0], 0.8, color=SHARED_COLOUR,
                    edgecolor="white", label=SHARED)  # fmt: skip
    speed = _wide(df[~df["gpus"].isin(shared)], "speedup_vs_1gpu")
    if len(speed):
        common.bars(ax2, speed, palette=palette)
    for i, g in enumerate(speed.index):  # the ideal speed-up is the GPU count: a mark per group
        ax2.hlines(g, i - 0.45, i + 0.45, colors="black", linestyles=":",
                   label="ideal (= GPUs)" if i == 0 else None)  # fmt: skip
    ax1.set(xlabel="GPUs (ranks)", ylabel="total time [s]")
    ax2.set(xlabel="GPUs (ranks)", ylabel="speed-up over 1 GPU [x]")
    ax2.set_ylim(0, max(ax2.get_ylim()[1], 1.0))
    handles, labels = ax1.get_legend_handles_labels()
    more = [(h, lb) for h, lb in zip(*ax2.get_legend_handles_labels(), strict=True)
            if lb not in labels]  # fmt: skip
    fig.legend([*handles, *(h for h, _ in more)], [*labels, *(lb for _, lb in more)],
               fontsize=8, frameon=False, loc="center left", bbox_to_anchor=(1.0, 0.5))  # fmt: skip
    fig.suptitle(f"Workload distribution strategies ({common.runs_per_bar(df, ['strategy', 'gpus'])})"
                 f"\n{common.subtitle(meta)}", fontsize=10)  # fmt: skip
    fig.tight_layout()
    return fig


if __name__ == "__main__":
    common.main_for(draw, TARGET)
