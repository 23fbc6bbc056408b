"""V3 (Table 2): total time, accuracy and efficiency by precision and GPU count."""

from __future__ import annotations

import pandas as pd

from analysis import common as c

PAPER_CSV = "table2_precision.csv"
FIGURE = False
KEYS = ["gpus", "precision"]
VALUES = ["total_time_s", "inference_accuracy_pct", "efficiency_vs_1gpu_pct",
          "efficiency_vs_fp64_pct"]  # fmt: skip
ORDER = ["fp64", "fp32", "fp16"]


def table(runs: pd.DataFrame, profile: str) -> pd.DataFrame:
    df = c.speedups(runs, by=["precision"])
    fp64 = {r["gpus"]: r["total_time_s"] for _, r in df.iterrows() if r["precision"] == "fp64"}
    df["efficiency_vs_fp64_pct"] = [
        100.0 * fp64[r["gpus"]] / r["total_time_s"]
        if r["precision"] != "fp64" and r["status"] == "ok" and fp64.get(r["gpus"])
        else None
        for _, r in df.iterrows()
    ]
    df = df.assign(
        efficiency_vs_1gpu_pct=100.0 * df["speedup_vs_1gpu"],
        _o=df["precision"].map(ORDER.index),
    ).sort_values(["gpus", "_o"])
    df = df.rename(columns={"final_test_accuracy_pct": "inference_accuracy_pct"})
    return df[[*KEYS, "precision_effective", *VALUES, "status", "run"]]


def paper() -> pd.DataFrame:
    p = c.paper_table(PAPER_CSV)
    return p.assign(precision=p["precision"].str.lower(), status="ok", run="paper")


def compact(t: pd.DataFrame) -> pd.DataFrame:
    return c.compact(t, KEYS, VALUES, order={"precision": ORDER})


def notes(runs: pd.DataFrame, t: pd.DataFrame) -> list[str]:
    if c.on_gpu(runs):
        return []
    return [
        "CPU run: FP16 is requested but runs as bf16 autocast (CPU has no useful fp16 "
        "autocast); on a CPU without bf16 instructions this is slower than FP32."
    ]


def gates(runs: pd.DataFrame, t: pd.DataFrame) -> dict[str, str]:
    return {"learned": c.not_learned(runs), "paper_data": c.not_paper_data(runs)}
