"""V6 (J 4.2.1): profiler metrics by precision, beside the paper's quoted seconds.

One row per (run, metric) (analysis/profiles/artifact.py), with `paper_s`, the seconds the paper
quoted for that metric and precision (reference/paper/profiler_quotes.csv), beside ours. paper()
sets those quotes in this table's shape for the self-check of V6a-c.
"""

from __future__ import annotations

import pandas as pd

from analysis import common as c
from analysis import draw_profile
from analysis.profiles import artifact as pa
from analysis.profiles.metrics import LABELS
from run.vision.spec import PAPER_PRECISIONS

PAPER_CSV = "profiler_quotes.csv"
KEYS = ["precision"]
METRICS = ["memcpy_htod", "cudaMemcpyAsync", "nccl_broadcast", "cudaEventDestroy"]
# metric -> its name in reference/paper/profiler_quotes.csv
QUOTE_NAMES = {
    "memcpy_htod": "CUDA memcpy HtoD",
    "cudaMemcpyAsync": "cudaMemcpyAsync",
    "nccl_broadcast": "ncclDevKernel_Broadcast",
    "cudaEventDestroy": "cudaEventDestroy",
}
# the report's columns: the paper's four metrics in seconds, summed over ranks
SHORT = {**QUOTE_NAMES, "memcpy_htod": "HtoD"}
COMPACT = {f"{SHORT[m]} [s]": ([m], "total_s") for m in METRICS}


def _quotes() -> pd.DataFrame:
    q = c.paper_table(PAPER_CSV)
    q = q[q["experiment"] == "vision-precision"]
    by_name = {v: k for k, v in QUOTE_NAMES.items()}
    return q.assign(metric=q["metric"].map(by_name), precision=q["condition"].str.lower())


def build_table(runs: pd.DataFrame, tidy: pd.DataFrame) -> pd.DataFrame:
    t = pa.table(runs, tidy, ["precision", "gpus"], METRICS)
    quotes = {(r["metric"], r["precision"]): r["value_s"] for _, r in _quotes().iterrows()}
    t["paper_s"] = [quotes.get((m, p)) for m, p in zip(t["metric"], t["precision"], strict=True)]
    t["precision_order"] = t["precision"].map(PAPER_PRECISIONS.index)
    t = t.sort_values(
        ["kind", "metric", "precision_order"], ascending=[False, True, True], kind="mergesort"
    )
    return t.drop(columns="precision_order")


def paper() -> pd.DataFrame:
    """The seconds J 4.2.1 (and C 3.4 for the broadcast kernel) quote; no GPU count (empty)."""
    q = _quotes()
    t = pd.DataFrame({
        "precision": q["precision"], "gpus": float("nan"), "run": "paper", "status": "ok",
        "source": q["source"], "ranks": pd.NA, "kind": pa.PAPER, "metric": q["metric"],
        "label": q["metric"].map(LABELS), "calls": pd.NA, "total_s": q["value_s"].astype(float),
        "share_pct": float("nan"), "bytes": pd.NA, "measured": True, "note": "",
        "paper_s": q["value_s"].astype(float),
    })  # fmt: skip
    return t.reset_index(drop=True)


def compact(t: pd.DataFrame) -> pd.DataFrame:
    """Precision as rows, the paper's four metrics in seconds (medians over repeats)."""
    return c.compact(
        pa.per_run(t, KEYS, COMPACT), KEYS, list(COMPACT), order={"precision": PAPER_PRECISIONS}
    )


def notes(runs: pd.DataFrame, t: pd.DataFrame) -> list[str]:
    out = pa.notes(runs, t)
    if not c.on_gpu(runs):
        out.append("CPU run: FP16 runs as bf16 autocast (see table-precision).")
    return out


def gates(runs: pd.DataFrame, t: pd.DataFrame) -> dict[str, str]:
    """`gpu`: a CPU run's profile holds no CUDA; `records_cuda_event_destroy` (V6c): the profiler
    in use can record cudaEventDestroy (torch.profiler cannot, even on a GPU)."""
    return {"gpu": pa.gpu_gate(runs), **pa.recorded_gates(t, METRICS)}


ARTIFACT = draw_profile.artifact(
    build_table,
    compact=compact,
    keys=KEYS,
    paper=paper,
    paper_csv=PAPER_CSV,
    notes=notes,
    gates=gates,
)
