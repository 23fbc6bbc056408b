"""V6 (J 4.2.1): profiler metrics by precision, beside the paper's quoted seconds."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from analysis import common as c
from analysis.profiles import artifact as pa

TARGET, EXP = "table-precision-profile", "V6"
ORDER = ["fp64", "fp32", "fp16"]
METRICS = ["memcpy_htod", "cudaMemcpyAsync", "nccl_broadcast", "cudaEventDestroy"]
# metric -> its name in reference/paper/profiler_quotes.csv
QUOTE_NAMES = {
    "memcpy_htod": "CUDA memcpy HtoD",
    "cudaMemcpyAsync": "cudaMemcpyAsync",
    "nccl_broadcast": "ncclDevKernel_Broadcast",
    "cudaEventDestroy": "cudaEventDestroy",
}


def paper_quotes() -> dict[tuple[str, str], float]:
    q = c.paper_table("profiler_quotes.csv")
    q = q[q["experiment"] == "vision-precision"]
    by_name = {v: k for k, v in QUOTE_NAMES.items()}
    return {(by_name[r["metric"]], r["condition"].lower()): r["value_s"] for _, r in q.iterrows()}


def build_table(runs: pd.DataFrame, tidy: pd.DataFrame) -> pd.DataFrame:
    t = pa.table(runs, tidy, ["precision", "gpus"], METRICS)
    quotes = paper_quotes()
    t["paper_s"] = [quotes.get((m, p)) for m, p in zip(t["metric"], t["precision"], strict=True)]
    t["precision_order"] = t["precision"].map(ORDER.index)
    t = t.sort_values(
        ["kind", "metric", "precision_order"], ascending=[False, True, True], kind="mergesort"
    )
    return t.drop(columns="precision_order")


def _falls(t: pd.DataFrame, metric: str, factor: float) -> tuple[bool | None, str]:
    vals = [pa.value(t, metric, precision=p) for p in ORDER]
    quotes = paper_quotes()
    paper = "/".join(f"{quotes[(metric, p)]:g}" for p in ORDER)
    ev = "FP64/FP32/FP16: " + "/".join(pa.fmt(v) for v in vals) + f" (paper: {paper} s)"
    if None in vals:
        return None, ev
    return vals[0] > factor * vals[1] and vals[1] > factor * vals[2], ev


def claims(t: pd.DataFrame) -> list[dict[str, str]]:
    out = []
    for cid, metric, text, factor, crit in (
        ("V6a", "memcpy_htod",
         "HtoD time halves FP64->FP32 and quarters FP64->FP16 (226/104/50 s)", 1.5,
         "HtoD time falls by more than 1.5x at each step FP64 -> FP32 -> FP16"),
        ("V6b", "cudaMemcpyAsync", "cudaMemcpyAsync time falls (1334/724/478 s)", 1.0,
         "cudaMemcpyAsync time falls at each step FP64 -> FP32 -> FP16"),
        ("V6c", "cudaEventDestroy", "cudaEventDestroy falls more than 2x per step (205/84/16 s)",
         2.0, "cudaEventDestroy time falls by more than 2x at each step FP64 -> FP32 -> FP16"),
    ):  # fmt: skip
        if not pa.measured(t, [metric]):
            out.append(pa.unmeasured_claim(cid, text, crit, [metric], t))
            continue
        ok, ev = _falls(t, metric, factor)
        out.append(c.claim(cid, text, crit, c.judged(ok), ev))
    return out


def build(profile: str) -> Path:
    runs, skipped = c.experiment_runs(EXP, profile)
    t = build_table(runs, pa.run_metrics(runs, profile))
    notes = pa.notes(t, runs)
    if not c.on_gpu(runs):
        notes.append("CPU run: FP16 runs as bf16 autocast (see table-precision).")
    return c.write_artifact(
        TARGET,
        profile,
        t,
        experiments=[EXP],
        claims=claims(t),
        notes=notes,
        paper_csv="profiler_quotes.csv",
        skipped=skipped,
        figure=False,
    )


if __name__ == "__main__":
    c.main_for(build, __doc__)
