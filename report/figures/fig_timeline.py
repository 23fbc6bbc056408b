"""V9: per rank, the busy intervals over each run (one panel per loader and GPU count), the
pauses above the threshold in red."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from report.figures import common

TARGET = "fig-timeline"


def draw(df: pd.DataFrame, meta: dict) -> plt.Figure:
    ok = df[df["status"] == "ok"].sort_values(["loader", "gpus"], ascending=[False, True])
    n = max(len(ok), 1)
    fig, axes = plt.subplots(n, 1, figsize=(8, 1.0 + 0.9 * n), squeeze=False, sharex=True)
    gaps = common.extra_table(TARGET, meta["profile"], "gaps")
    busy_all = common.extra_table(TARGET, meta["profile"], "busy")
    for ax, (_, r) in zip(axes[:, 0], ok.iterrows(), strict=False):
        busy = busy_all[busy_all["run"] == r["run"]]
        for rank, one in busy.groupby("rank"):
            ax.broken_barh(list(zip(one["t0"], one["t1"] - one["t0"], strict=True)),
                           (rank - 0.4, 0.8), color="tab:green")  # fmt: skip
        mine = gaps[gaps["run"] == r["run"]]
        for _, g in mine.iterrows():
            ax.broken_barh([(g["start_s"], g["length_s"])], (g["rank"] - 0.4, 0.8), color="tab:red")
        label = "DataLoader" if r["loader"] == "torch" else "DALI"
        ax.set_ylabel(f"{label}\n{int(r['gpus'])} GPU", fontsize=8)
        ax.set_yticks(range(int(r["gpus"])))
        ax.set_yticklabels([f"rank {i}" for i in range(int(r["gpus"]))], fontsize=7)
    axes[-1, 0].set_xlabel("time since the run's first step [s]  (green: busy, red: pause)")
    fig.suptitle(f"Activity per rank\n{common.subtitle(meta)}", fontsize=10)
    return fig


if __name__ == "__main__":
    common.main_for(draw, TARGET)
