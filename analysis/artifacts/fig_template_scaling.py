"""L6 (J Fig.14): total tuning time by template, method (LoRA, DPO) and GPU count.

The time is the epoch's training time (`epoch_time_s`: start of the first step to the end of the
last, measured when the run covers the whole epoch, else s/it x steps per epoch and marked
projected); model loading and start-up are left out, as in the paper's recipe logs. The paper
printed no numbers for this figure: there is no paper() table and no self-check for L6.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from analysis import common as c
from analysis import draw
from analysis import steady as st
from analysis.artifacts import fig_templates as ft
from analysis.driver import Artifact
from run.llm.spec import METHOD_LABELS

KEYS = ["template", "method"]
METHODS = ["lora", "dpo"]  # of the four
COLUMNS = ["template", "dataset", "method", "method_label", "gpus", "tuning_time_s",
           "epoch_time_projected", "speedup_vs_1gpu", "steps", "steps_per_epoch", "status",
           "run"]  # fmt: skip


def table(runs: pd.DataFrame, scale: str) -> pd.DataFrame:
    if runs.empty:
        return pd.DataFrame(columns=COLUMNS)
    cols = ("epoch_time_s", "epoch_time_projected", "steps", "steps_per_epoch")
    df = ft.llm_cells(runs, cols, METHODS)
    df = st.llm_steady(df, scale).sort_values(["_t", "_m", "gpus"])
    df = df.rename(columns={f"epoch_time_s{s}": f"tuning_time_s{s}"
                            for s in ("", "_steady", "_steady_lo", "_steady_hi")})  # fmt: skip
    for s in ("", "_steady"):
        base = {
            (r["dataset"], r["method"]): r[f"tuning_time_s{s}"]
            for _, r in df.iterrows()
            if r["gpus"] == 1 and r["status"] == "ok"
        }
        df[f"speedup_vs_1gpu{s}"] = [
            base[(r["dataset"], r["method"])] / r[f"tuning_time_s{s}"]
            if r["status"] == "ok"
            and c._num(base.get((r["dataset"], r["method"])))
            and c._num(r[f"tuning_time_s{s}"])
            else None
            for _, r in df.iterrows()
        ]
    return df[COLUMNS + st.steady_cols(df, "tuning_time_s", "speedup_vs_1gpu")]


def compact(t: pd.DataFrame) -> pd.DataFrame:
    return ft.by_gpus(t, KEYS, "tuning_time_s", "s", METHODS)


def notes(runs: pd.DataFrame, t: pd.DataFrame) -> list[str]:
    out = c.llm_cpu_notes(runs)
    if t["epoch_time_projected"].fillna(False).astype(bool).any():
        out.append("Times marked projected are s/it x steps per epoch (runs capped in steps).")
    elif len(c.ok_runs(t)):
        out.append("Every time is a measured whole epoch of the template subset.")
    return out


METHOD_NAMES = [METHOD_LABELS[m] for m in METHODS]


def figure(df: pd.DataFrame, meta: dict) -> plt.Figure:
    gpus = sorted(df["gpus"].unique())
    # each template on its own y range: DPO takes several times LoRA's time, and a shared axis
    # flattens the cheap templates or clips the dear ones; so every panel carries its own label
    # and the title says the scales differ
    projected = bool(df["epoch_time_projected"].fillna(False).astype(bool).any())
    ylabel = "tuning time, one epoch [s]" + (" (projected)" if projected else "")
    fig, axes = draw.panel_bars(df, "template", ft.TEMPLATES, "gpus", gpus, "method_label",
                                METHOD_NAMES, "tuning_time_s", figsize=(11, 3.6), sharey=False)  # fmt: skip
    for ax, t in zip(axes, ft.TEMPLATES, strict=True):
        ax.set_title(f"{t} (own y scale)", fontsize=9)
        ax.set_xlabel("GPUs (ranks)")
        ax.set_ylabel(ylabel, fontsize=8)
    draw.legend(axes[0], fig=fig)
    runs = draw.runs_per_bar(df, ["template", "method_label", "gpus"])
    fig.suptitle(f"Total tuning time by template and method ({runs}; each panel on its own y "
                 f"scale)\n{draw.subtitle(meta)}", fontsize=10)  # fmt: skip
    fig.tight_layout()
    return fig


ARTIFACT = Artifact(table=table, compact=compact, keys=KEYS, notes=notes, figure=figure)
