"""V9: per rank, the training and evaluation steps over each run (one panel per loader and GPU
count), the pauses above the threshold in red, and where each epoch and each evaluation began
(the boundaries V9a says the pauses precede)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.lines import Line2D

from analysis import draw as common
from run.vision.spec import LOADER_LABELS

TARGET = "fig-timeline"
SERIES = {"training step": "tab:green", "evaluation step": "tab:blue",
          "pause (above threshold)": "tab:red"}  # fmt: skip
STEP_SERIES = {"train_step": "training step", "eval_step": "evaluation step"}
# the marks of the -phases table's spans: a line across the rank's row where each began
MARKS = {"epoch": ("epoch start", "-"), "eval": ("evaluation start", "--")}


def series(df: pd.DataFrame) -> list[str]:
    """The same three in every panel: what a rank does, and the pauses between."""
    return list(SERIES)


def _phases(profile: str) -> pd.DataFrame:
    """Each epoch's training and evaluation span per rank (tables older than it: none)."""
    try:
        return common.extra_table(TARGET, profile, "phases")
    except FileNotFoundError:
        return pd.DataFrame(columns=["run", "rank", "phase", "epoch", "t0", "t1"])


def draw(df: pd.DataFrame, meta: dict) -> plt.Figure:
    ok = df[df["status"] == "ok"].sort_values(["loader", "gpus"], ascending=[False, True])
    n = max(len(ok), 1)
    fig, axes = plt.subplots(n, 1, figsize=(8, 1.0 + 1.15 * n), squeeze=False, sharex=True)
    gaps = common.extra_table(TARGET, meta["profile"], "gaps")
    busy_all = common.extra_table(TARGET, meta["profile"], "busy")
    phases = _phases(meta["profile"])
    pause_label = list(SERIES)[-1]
    for ax, (_, r) in zip(axes[:, 0], ok.iterrows(), strict=False):
        busy = busy_all[busy_all["run"] == r["run"]]
        kind = busy["phase"] if "phase" in busy else pd.Series("train_step", index=busy.index)
        for phase, label in STEP_SERIES.items():  # in the legend's order
            mine = busy[kind == phase]
            for rank, one in mine.groupby("rank"):
                ax.broken_barh(list(zip(one["t0"], one["t1"] - one["t0"], strict=True)),
                               (rank - 0.4, 0.8), color=SERIES[label], label=label)  # fmt: skip
        for _, g in gaps[gaps["run"] == r["run"]].iterrows():
            ax.broken_barh([(g["start_s"], g["length_s"])], (g["rank"] - 0.4, 0.8),
                           color=SERIES[pause_label], label=pause_label)  # fmt: skip
        for _, p in phases[(phases["run"] == r["run"]) & phases["phase"].isin(MARKS)].iterrows():
            _, ls = MARKS[p["phase"]]
            # "_": a mark, not a data series (the figure's legend names it)
            ax.vlines(p["t0"], p["rank"] - 0.5, p["rank"] + 0.5, colors="black", linestyles=ls,
                      lw=1.1, label=f"_{p['phase']}")  # fmt: skip
            if p["rank"] == 0 and p["phase"] == "epoch":
                ax.text(p["t0"], -0.5, f" epoch {int(p['epoch'])}", fontsize=6, va="bottom",
                        ha="left")  # fmt: skip
        if pd.notna(r.get("pauses")) and pd.notna(r.get("threshold_s")):
            ax.set_title(f"{int(r['pauses'])} pause(s) above {r['threshold_s']:.2f} s",
                         fontsize=7, loc="right")  # fmt: skip
        label = LOADER_LABELS[r["loader"]]
        ax.set_ylabel(f"{label}\n{common.gpus_label(r['gpus'])}", fontsize=8)
        ax.set_yticks(range(int(r["gpus"])))
        ax.set_yticklabels([f"rank {i}" for i in range(int(r["gpus"]))], fontsize=7)
        ax.set_ylim(int(r["gpus"]) - 0.5, -0.5)  # rank 0 on top
    axes[-1, 0].set_xlabel("time since the run's first epoch began [s]")
    # one legend entry per series and mark, drawn or not: a run without pauses shows that it
    # had none
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in SERIES.values()]
    handles += [Line2D([], [], color="black", ls=ls, lw=1.1) for _, ls in MARKS.values()]
    fig.legend(handles, [*SERIES, *(m for m, _ in MARKS.values())], fontsize=8, frameon=False,
               loc="center left", bbox_to_anchor=(1.0, 0.5))  # fmt: skip
    # the host's steps either way; on CPU ranks there is no GPU whose activity they stand for
    where = " (CPU ranks, no GPU)" if (meta.get("gates") or {}).get("gpu") else ""
    fig.suptitle(f"Training and evaluation steps per rank{where}, pauses, epoch and evaluation "
                 f"starts\n{common.subtitle(meta)}", fontsize=10)  # fmt: skip
    fig.tight_layout()
    return fig


if __name__ == "__main__":
    common.main_for(draw, TARGET)
