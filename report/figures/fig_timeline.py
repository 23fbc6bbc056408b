"""V9: per rank, the busy intervals over each run (one panel per loader and GPU count), the
pauses above the threshold in red."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from report.figures import common

TARGET = "fig-timeline"
SERIES = {"busy (a step)": "tab:green", "pause (above threshold)": "tab:red"}


def series(df: pd.DataFrame) -> list[str]:
    """The same two in every panel: what a rank does, and the pauses between."""
    return list(SERIES)


def draw(df: pd.DataFrame, meta: dict) -> plt.Figure:
    ok = df[df["status"] == "ok"].sort_values(["loader", "gpus"], ascending=[False, True])
    n = max(len(ok), 1)
    fig, axes = plt.subplots(n, 1, figsize=(8, 1.0 + 1.05 * n), squeeze=False, sharex=True)
    gaps = common.extra_table(TARGET, meta["profile"], "gaps")
    busy_all = common.extra_table(TARGET, meta["profile"], "busy")
    (busy_label, busy_c), (pause_label, pause_c) = SERIES.items()
    for ax, (_, r) in zip(axes[:, 0], ok.iterrows(), strict=False):
        busy = busy_all[busy_all["run"] == r["run"]]
        for rank, one in busy.groupby("rank"):
            ax.broken_barh(list(zip(one["t0"], one["t1"] - one["t0"], strict=True)),
                           (rank - 0.4, 0.8), color=busy_c, label=busy_label)  # fmt: skip
        for _, g in gaps[gaps["run"] == r["run"]].iterrows():
            ax.broken_barh([(g["start_s"], g["length_s"])], (g["rank"] - 0.4, 0.8),
                           color=pause_c, label=pause_label)  # fmt: skip
        if pd.notna(r.get("pauses")) and pd.notna(r.get("threshold_s")):
            ax.set_title(f"{int(r['pauses'])} pause(s) above {r['threshold_s']:.2f} s",
                         fontsize=7, loc="right")  # fmt: skip
        label = "DataLoader" if r["loader"] == "torch" else "DALI"
        ax.set_ylabel(f"{label}\n{common.gpus_label(r['gpus'])}", fontsize=8)
        ax.set_yticks(range(int(r["gpus"])))
        ax.set_yticklabels([f"rank {i}" for i in range(int(r["gpus"]))], fontsize=7)
    axes[-1, 0].set_xlabel("time since the run's first step [s]")
    # one legend entry per series, drawn or not: a run without pauses shows that it had none
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in SERIES.values()]
    fig.legend(handles, list(SERIES), fontsize=8, frameon=False, loc="upper right",
               bbox_to_anchor=(1.0, 1.0))  # fmt: skip
    fig.suptitle(f"Activity per rank\n{common.subtitle(meta)}", fontsize=10)
    fig.tight_layout()
    return fig


if __name__ == "__main__":
    common.main_for(draw, TARGET)
