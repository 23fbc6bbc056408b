"""V5 (C Fig.3, J Fig.3-4): profiler metrics by image size, GPU count and pin_memory.

One row per (run, metric) (analysis/profiles/artifact.py): the paper's metrics, the all-API
kernel launches beside cudaLaunchKernel (never in a claim) and labelled CPU stand-ins. The paper
quoted some of its seconds in J 4.2.2 (reference/paper/profiler_quotes.csv): paper() sets them in
this table's shape for the self-check of V5b and V5c; it quoted no shares, so V5a has none.
"""

from __future__ import annotations

import re

import pandas as pd

from analysis import common as c
from analysis import draw_profile
from analysis.profiles import artifact as pa
from analysis.profiles.metrics import LABELS, NCCL_METRICS

PAPER_CSV = "profiler_quotes.csv"
KEYS = ["image_size", "gpus", "pin_memory"]
NCCL = list(NCCL_METRICS)
METRICS = ["memcpy_htod", "cudaLaunchKernel", "cudaStreamSynchronize", *NCCL]
# the report's columns: seconds summed over ranks (J Fig.4), and the share V5a compares (Fig.3)
COMPACT: dict[str, tuple[list[str], str]] = {
    "HtoD [s]": (["memcpy_htod"], "total_s"),
    "cudaLaunchKernel [s]": (["cudaLaunchKernel"], "total_s"),
    "cudaStreamSynchronize [s]": (["cudaStreamSynchronize"], "total_s"),
    "NCCL kernels [s]": (NCCL, "total_s"),
    "launch + NCCL [%]": (["cudaLaunchKernel", *NCCL], "share_pct"),
}
# profiler_quotes.csv metric -> our metric key. The paper's "NCCL kernels" is a total it does not
# split by kernel: it goes in as nccl_other, labelled as the total; every rule and the report's
# column add up all NCCL metrics, so the key does not change a number.
QUOTE_METRICS = {
    "CUDA memcpy HtoD": "memcpy_htod",
    "cudaStreamSynchronize": "cudaStreamSynchronize",
    "NCCL kernels": "nccl_other",
}
NCCL_TOTAL_LABEL = "NCCL kernels, all (the paper's total)"


def build_table(runs: pd.DataFrame, tidy: pd.DataFrame) -> pd.DataFrame:
    t = pa.table(runs, tidy, KEYS, METRICS)  # + kernel_launch_all beside cudaLaunchKernel
    t = t.assign(k=pa.kind_order(t))
    return t.sort_values([*KEYS, "k"], kind="mergesort").drop(columns="k")


def _condition(text: str) -> dict[str, object]:
    """'500px pin_memory=false (range low)', '4 GPUs pin_memory=true' -> the table's keys.
    Unstated: image size 500 px (J 4.2.2 discusses the 500 px runs by the NCCL quotes), GPUs NaN
    (HtoD and sync quotes: compared with each other only), pin_memory off (the text sets "2 GPUs",
    "4 GPUs" against "4 GPUs pin_memory=true")."""
    size = re.search(r"(\d+)\s*px", text)
    gpus = re.search(r"(\d+)\s*GPUs?", text)
    pin = re.search(r"pin_memory=(true|false)", text)
    return {
        "image_size": int(size.group(1)) if size else 500,
        "gpus": float(gpus.group(1)) if gpus else float("nan"),
        "pin_memory": bool(pin and pin.group(1) == "true"),
    }


def paper() -> pd.DataFrame:
    """The seconds J 4.2.2 quotes, a row per quote. A quoted range (HtoD unpinned: 85-101 s at
    500 px) is two rows, "paper (range low)"/"(range high)": the engine takes them as repeats, so
    a claim compares the midpoint and a verdict the ends would split is inconclusive."""
    q = c.paper_table(PAPER_CSV)
    q = q[q["experiment"] == "vision-metrics"]
    rows = []
    for _, r in q.iterrows():
        metric = QUOTE_METRICS[r["metric"]]
        end = re.search(r"\(range (low|high)\)", r["condition"])
        rows.append({
            **_condition(r["condition"]),
            "run": f"paper (range {end.group(1)})" if end else "paper",
            "status": "ok", "source": r["source"], "ranks": pd.NA, "kind": pa.PAPER,
            "metric": metric,
            "label": NCCL_TOTAL_LABEL if r["metric"] == "NCCL kernels" else LABELS[metric],
            "calls": pd.NA, "total_s": float(r["value_s"]), "share_pct": float("nan"),
            "bytes": pd.NA, "measured": True, "note": r["condition"],
        })  # fmt: skip
    return pd.DataFrame(rows, columns=[*KEYS, *pa.COLUMNS])


def compact(t: pd.DataFrame) -> pd.DataFrame:
    """Image size x GPUs x pin_memory as rows (quotes without a GPU count: GPUs empty)."""
    return c.compact(pa.per_run(t, KEYS, COMPACT), KEYS, list(COMPACT))


# {what}: what the profile recorded (CUDA API calls, or CPU ops on a CPU run)
TITLE = "Time in {what}, by image size, GPUs and pin_memory"
ARTIFACT = draw_profile.artifact(
    build_table, TITLE, compact=compact, keys=KEYS, paper=paper, paper_csv=PAPER_CSV
)
