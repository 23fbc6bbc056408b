"""V1 (C Fig.1): total time and speed-up vs 1 GPU for DDP, DDP-RR and DDP-DS (no paper
numbers: no paper() table, no self-check)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from analysis import common as c
from analysis import draw
from analysis import steady as st
from analysis.driver import Artifact
from run.vision.spec import STRATEGIES, STRATEGY_LABELS

KEYS = ["gpus"]


def table(runs: pd.DataFrame, scale: str) -> pd.DataFrame:
    # The 1-GPU cell is one shared run; it stands as the 1-GPU point of every strategy.
    ones = runs[runs["gpus"] == 1]
    rows = [runs[runs["gpus"] > 1], *(ones.assign(strategy=s) for s in STRATEGIES)]
    df = st.with_steady(pd.concat(rows, ignore_index=True), scale, "total_time_s",
                       "total_time_s")  # fmt: skip
    df = c.speedups(df, by=["strategy"])
    df = c.speedups(df, by=["strategy"], time_col="total_time_s_steady", suffix="_steady")
    df["strategy_order"] = df["strategy"].map(STRATEGIES.index)
    df = df.sort_values(["strategy_order", "gpus"])
    steady = st.steady_cols(df, "total_time_s", "speedup_vs_1gpu", "efficiency_pct")
    return df[["strategy", "gpus", "total_time_s", "speedup_vs_1gpu", "efficiency_pct", *steady,
               "status", "run"]]  # fmt: skip


def compact(t: pd.DataFrame) -> pd.DataFrame:
    """GPUs as rows; each strategy's total time and speed-up over 1 GPU as columns (Fig.1's two
    panels, one line per strategy)."""
    t = t.assign(strategy=t["strategy"].map(STRATEGY_LABELS))
    names = {
        "total_time_s": lambda s: f"{s} [s]",
        "speedup_vs_1gpu": lambda s: f"{s} speed-up",
        "speedup_vs_1gpu_steady": lambda s: f"{s} steady-state speed-up",
    }
    names = {k: v for k, v in names.items() if k in t and t[k].notna().any()}
    return c.pivot(t, KEYS, "strategy", names, order=list(STRATEGY_LABELS.values()))


notes = c.cpu_note(
    "CPU run: each rank gets the same compute threads at every rank count "
    "(run/node/threads.py), so n ranks have n times one rank's compute, as n GPUs would, "
    "while the ranks do not outnumber the cores."
)


SHARED = "one run for all (1 rank: same work)"  # a GPU count whose strategies share one run
SHARED_COLOUR = "tab:gray"


def shared_gpus(df: pd.DataFrame) -> list[int]:
    """The GPU counts where every strategy's row is the same run (1 GPU: the same work)."""
    ok = df[df["status"] == "ok"]
    if ok["strategy"].nunique() < 2:
        return []
    runs = ok.groupby("gpus")["run"].nunique()
    return sorted(int(g) for g in runs[runs == 1].index)


def _wide(df: pd.DataFrame, col: str) -> pd.DataFrame:
    w = df.pivot_table(index="gpus", columns="strategy", values=col, aggfunc="median")
    cols = [s for s in STRATEGY_LABELS if s in w.columns]
    return w.reindex(columns=cols).rename(columns=STRATEGY_LABELS)


def figure(df: pd.DataFrame, meta: dict) -> plt.Figure:
    df = df[df["status"] == "ok"]
    shared = shared_gpus(df)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.6))
    # GPU counts are categories (1, 2, 4, 8), not a continuum: grouped bars, not lines
    times = _wide(df, "total_time_s")
    own = times.copy()
    own.loc[own.index.isin(shared)] = float("nan")  # drawn once, below
    palette = draw.bars(ax1, own)
    for i, g in enumerate(times.index):
        if g in shared:  # one run: one bar across the group
            ax1.bar(i, times.loc[g].dropna().iloc[0], 0.8, color=SHARED_COLOUR,
                    edgecolor="white", label=SHARED)  # fmt: skip
    speed = _wide(df[~df["gpus"].isin(shared)], "speedup_vs_1gpu")
    if len(speed):
        draw.bars(ax2, speed, palette=palette)
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
    fig.suptitle(f"Workload distribution strategies ({draw.runs_per_bar(df, ['strategy', 'gpus'])})"
                 f"\n{draw.subtitle(meta)}", fontsize=10)  # fmt: skip
    fig.tight_layout()
    return fig


ARTIFACT = Artifact(table=table, compact=compact, keys=KEYS, notes=notes, figure=figure)
