"""L6 (J Fig.14): total tuning time by template, method (LoRA, DPO) and GPU count.

The time is the epoch's training time (`epoch_time_s`: start of the first step to the end of the
last, measured when the run covers the whole epoch, else s/it x steps per epoch and marked
projected); model loading and start-up are left out, as in the paper's recipe logs. The paper
printed no numbers for this figure: there is no paper() table and no self-check for L6.
"""

from __future__ import annotations

import pandas as pd

from analysis import common as c
from analysis import steady as st

FIGURE = True
KEYS = ["template", "method"]
METHODS = ["lora", "dpo"]
COLUMNS = ["template", "dataset", "method", "method_label", "gpus", "tuning_time_s",
           "epoch_time_projected", "speedup_vs_1gpu", "steps", "steps_per_epoch", "status",
           "run"]  # fmt: skip


def table(runs: pd.DataFrame, profile: str) -> pd.DataFrame:
    df = runs.copy()
    for col in ("epoch_time_s", "epoch_time_projected", "steps", "steps_per_epoch"):
        if col not in df:
            df[col] = None
    if df.empty:
        return pd.DataFrame(columns=COLUMNS)
    df["template"] = df["dataset"].map(c.LLM_TEMPLATE_LABELS)
    df["method_label"] = df["method"].map(c.LLM_METHOD_LABELS)
    df["_t"] = df["dataset"].map(c.LLM_TEMPLATES.index)
    df["_m"] = df["method"].map(METHODS.index)
    df = st.llm_steady(df, profile).sort_values(["_t", "_m", "gpus"])
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
    order = {"template": list(c.LLM_TEMPLATE_LABELS.values()),
             "method": [c.LLM_METHOD_LABELS[m] for m in METHODS]}  # fmt: skip
    return c.by_gpus(t, KEYS, "tuning_time_s", "s", order)


def notes(runs: pd.DataFrame, t: pd.DataFrame) -> list[str]:
    out = c.llm_cpu_notes(runs)
    if t["epoch_time_projected"].fillna(False).astype(bool).any():
        out.append("Times marked projected are s/it x steps per epoch (runs capped in steps).")
    elif len(c.ok_runs(t)):
        out.append("Every time is a measured whole epoch of the template subset.")
    return out
