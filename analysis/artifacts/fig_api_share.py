"""L7 (J Fig.15): share of time in CUDA API calls by template and method (multi-GPU).

One row per (run, metric) (analysis/profiles/artifact.py): the paper's five metrics, the
all-API kernel launches beside cudaLaunchKernel (never in a claim) and labelled CPU stand-ins.
The paper printed no numbers for this figure: there is no paper() table and no self-check.
"""

from __future__ import annotations

import pandas as pd

from analysis import draw_profile
from analysis.profiles import artifact as pa
from analysis.profiles import run_breakdown
from run.llm.spec import METHODS, TEMPLATE_DATASETS

KEYS = ["method", "template"]
METRICS = ["cudaLaunchKernel", "cudaStreamSynchronize", "memcpy_htod", "cudaEventSynchronize",
           "nccl_allgather_ring_ll"]  # fmt: skip
# the report's columns: the paper's names in its figure, share of the profiled time in percent
SHORT = {"cudaLaunchKernel": "cudaLaunchKernel", "cudaStreamSynchronize": "cudaStreamSynchronize",
         "memcpy_htod": "HtoD", "cudaEventSynchronize": "cudaEventSynchronize",
         "nccl_allgather_ring_ll": "AllGather RING LL"}  # fmt: skip


def build_table(runs: pd.DataFrame, tidy: pd.DataFrame) -> pd.DataFrame:
    # + kernel_launch_all beside cudaLaunchKernel; the claims' sums use METRICS, never it
    t = pa.table(runs, tidy, ["dataset", "method", "gpus"], METRICS)
    t = t.assign(o1=t["method"].map(METHODS.index), o2=t["dataset"].map(TEMPLATE_DATASETS.index),
                 k=pa.kind_order(t))  # fmt: skip
    return t.sort_values(["o1", "o2", "k"], kind="mergesort").drop(columns=["o1", "o2", "k"])


def compact(t: pd.DataFrame) -> pd.DataFrame:
    """Share of the profiled time [%] of the paper's five calls, per method and template."""
    return pa.by_method_template(t, METRICS, "share_pct", {m: f"{SHORT[m]} [%]" for m in METRICS})


def extra(runs: pd.DataFrame, t: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Beyond the paper: each profiled run's time breakdown, what the device did while the host
    was inside those calls."""
    return {"breakdown": run_breakdown.table(runs, runs.attrs.get("scale"))}


def notes(runs: pd.DataFrame, t: pd.DataFrame) -> list[str]:
    split = run_breakdown.table(runs, runs.attrs.get("scale"))
    return [*pa.notes(runs, t), run_breakdown.note(split, "-breakdown CSV")]


def title(runs: pd.DataFrame, t: pd.DataFrame) -> str:
    """CUDA API calls where the profile measured the paper's metrics; else the CPU ops it has."""
    paper = t[t["kind"] == pa.PAPER] if len(t) else t
    if len(paper) and (paper["measured"].astype(str) == "True").any():
        return "Share of time in CUDA API calls by template and method"
    return "Share of profiled time in CPU ops (no CUDA calls recorded) by template and method"


# {what}: what the profile recorded (CUDA API calls, or CPU ops on a CPU run)
FIGURE_TITLE = "Share of time in {what}, by template and method"
ARTIFACT = draw_profile.artifact(
    build_table,
    FIGURE_TITLE,
    ["method", "dataset"],
    compact=compact,
    keys=KEYS,
    notes=notes,
    extra=extra,
    title=title,
)
