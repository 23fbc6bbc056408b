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
from analysis.driver import Artifact
from run.llm.catalog import TEMPLATE_LABELS
from run.llm.spec import METHOD_LABELS, TEMPLATE_DATASETS

KEYS = ["template", "method"]
METHODS = ["lora", "dpo"]  # of the four
COLUMNS = ["template", "dataset", "method", "method_label", "gpus", "tuning_time_s",
           "epoch_time_projected", "speedup_vs_1gpu", "steps", "steps_per_epoch", "status",
           "run"]  # fmt: skip


def table(runs: pd.DataFrame, scale: str) -> pd.DataFrame:
    df = runs.copy()
    for col in ("epoch_time_s", "epoch_time_projected", "steps", "steps_per_epoch"):
        if col not in df:
            df[col] = None
    if df.empty:
        return pd.DataFrame(columns=COLUMNS)
    df["template"] = df["dataset"].map(TEMPLATE_LABELS)
    df["method_label"] = df["method"].map(METHOD_LABELS)
    df["_t"] = df["dataset"].map(TEMPLATE_DATASETS.index)
    df["_m"] = df["method"].map(METHODS.index)
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
    """Template x method as rows, the tuning time per GPU count as columns (the paper's lines)."""
    t = t.assign(method=t["method_label"]) if "method_label" in t else t
    order = {"template": list(TEMPLATE_LABELS.values()),
             "method": [METHOD_LABELS[m] for m in METHODS]}  # fmt: skip
    name = {"tuning_time_s": lambda g: f"{c.gpus_label(g)} [s]"}
    return c.pivot(t, KEYS, "gpus", name, rows=order, fill_status=True)


def notes(runs: pd.DataFrame, t: pd.DataFrame) -> list[str]:
    out = c.llm_cpu_notes(runs)
    if t["epoch_time_projected"].fillna(False).astype(bool).any():
        out.append("Times marked projected are s/it x steps per epoch (runs capped in steps).")
    elif len(c.ok_runs(t)):
        out.append("Every time is a measured whole epoch of the template subset.")
    return out


# the figure (python -m analysis fig-template-scaling --figure)

TEMPLATES = list(TEMPLATE_LABELS.values())

METHOD_NAMES = [METHOD_LABELS[m] for m in ("lora", "dpo")]


def figure(df: pd.DataFrame, meta: dict) -> plt.Figure:
    gpus = sorted(df["gpus"].unique())
    # each template on its own y range: DPO takes several times LoRA's time, and a shared axis
    # flattens the cheap templates or clips the dear ones; so every panel carries its own label
    # and the title says the scales differ
    projected = bool(df["epoch_time_projected"].fillna(False).astype(bool).any())
    ylabel = "tuning time, one epoch [s]" + (" (projected)" if projected else "")
    fig, axes = draw.panel_bars(df, "template", TEMPLATES, "gpus", gpus, "method_label",
                                METHOD_NAMES, "tuning_time_s", figsize=(11, 3.6), sharey=False)  # fmt: skip
    for ax, t in zip(axes, TEMPLATES, strict=True):
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
