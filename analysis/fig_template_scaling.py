"""L6 (J Fig.14): total tuning time by template, method (LoRA, DPO) and GPU count.

The time is the epoch's training time (`epoch_time_s`: start of the first step to the end of the
last, measured when the run covers the whole epoch, else s/it x steps per epoch and marked
projected); model loading and start-up are left out, as in the paper's recipe logs.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from analysis import common as c

TARGET, EXP = "fig-template-scaling", "L6"
METHODS = ["lora", "dpo"]
BAND = (20.0, 50.0)  # the paper's 30-40 % with 10 points either side


def build_table(df: pd.DataFrame) -> pd.DataFrame:
    df = df.copy()
    for col in ("epoch_time_s", "epoch_time_projected", "steps", "steps_per_epoch"):
        if col not in df:
            df[col] = None
    df["template"] = df["dataset"].map(c.LLM_TEMPLATE_LABELS)
    df["method_label"] = df["method"].map(c.LLM_METHOD_LABELS)
    df["_t"] = df["dataset"].map(c.LLM_TEMPLATES.index)
    df["_m"] = df["method"].map(METHODS.index)
    df = df.sort_values(["_t", "_m", "gpus"])
    df = df.rename(columns={"epoch_time_s": "tuning_time_s"})
    base = {
        (r["dataset"], r["method"]): r["tuning_time_s"]
        for _, r in df.iterrows()
        if r["gpus"] == 1 and r["status"] == "ok"
    }
    df["speedup_vs_1gpu"] = [
        base[(r["dataset"], r["method"])] / r["tuning_time_s"]
        if r["status"] == "ok" and base.get((r["dataset"], r["method"])) and r["tuning_time_s"]
        else None
        for _, r in df.iterrows()
    ]
    return df[
        [
            "template",
            "dataset",
            "method",
            "method_label",
            "gpus",
            "tuning_time_s",
            "epoch_time_projected",
            "speedup_vs_1gpu",
            "steps",
            "steps_per_epoch",
            "status",
            "run",
        ]
    ]


def claims(t: pd.DataFrame) -> list[dict[str, str]]:
    ok = c.ok_runs(t).dropna(subset=["tuning_time_s"])
    tt = {(r["dataset"], r["method"], int(r["gpus"])): r["tuning_time_s"] for _, r in ok.iterrows()}
    gpus = sorted({g for *_, g in tt})

    checks, parts = [], []
    for d in c.LLM_TEMPLATES:
        for m in METHODS:
            seq = [(g, tt[(d, m, g)]) for g in gpus if (d, m, g) in tt]
            if len(seq) < 2:
                continue
            checks.append(all(b[1] < a[1] for a, b in zip(seq, seq[1:], strict=False)))
            parts.append(
                f"{c.LLM_TEMPLATE_LABELS[d]} {c.LLM_METHOD_LABELS[m]}: "
                + " -> ".join(f"{v:.1f}" for _, v in seq)
                + " s"
            )
    a = c.claim(
        "L6a",
        "Tuning time falls as GPUs are added",
        "for every template and method, the time falls at each added GPU count",
        c.judged(all(checks) if checks else None),
        (f"GPUs {', '.join(map(str, gpus))}: " + "; ".join(parts)) if parts else "no scaling runs",
    )

    savings, parts = [], []
    for d in c.LLM_TEMPLATES:
        for g in gpus:
            if (d, "lora", g) in tt and (d, "dpo", g) in tt:
                s = 100.0 * (1 - tt[(d, "lora", g)] / tt[(d, "dpo", g)])
                savings.append(s)
                parts.append(f"{c.LLM_TEMPLATE_LABELS[d]}@{g}: {s:.0f} %")
    if savings:
        mean = sum(savings) / len(savings)
        verdict = c.judged(min(savings) > 0 and BAND[0] <= mean <= BAND[1])
        ev = f"LoRA time below DPO's by: {'; '.join(parts)} (mean {mean:.1f} %)"
    else:
        verdict, ev = c.UNMEASURED, "no cell with both LoRA and DPO"
    b = c.claim(
        "L6b",
        "LoRA is 30-40 % faster than DPO",
        f"LoRA faster in every cell, and LoRA's time below DPO's by {BAND[0]:.0f}-{BAND[1]:.0f} % "
        "on average (1 - t_LoRA / t_DPO; the paper's 30-40 % with 10 points either side)",
        verdict,
        ev,
    )
    return [a, b]


def build(profile: str) -> Path:
    df, skipped = c.experiment_runs(EXP, profile)
    table = build_table(df)
    notes = c.llm_cpu_notes(df)
    if table["epoch_time_projected"].fillna(False).astype(bool).any():
        notes.append("Times marked projected are s/it x steps per epoch (runs capped in steps).")
    else:
        notes.append("Every time is a measured whole epoch of the template subset.")
    return c.write_artifact(
        TARGET,
        profile,
        table,
        experiments=[EXP],
        claims=claims(table),
        notes=notes,
        paper_csv=None,
        skipped=skipped,
        figure=True,
    )


if __name__ == "__main__":
    c.main_for(build, __doc__)
