"""L4 (C Fig.6, J Fig.12): profiler metrics by pin_memory and GPU count, LoRA on alpaca.

One row per (run, metric) (analysis/profiles/artifact.py), as L3
(analysis/artifacts/fig_llm_api.py), with the NCCL kernels of the multi-GPU runs. The paper
printed no numbers for this figure: there is no paper() table and no self-check for L4.
"""

from __future__ import annotations

import pandas as pd

from analysis import draw_profile
from analysis.profiles import artifact as pa

KEYS = ["gpus", "pin_memory"]
NCCL = ["nccl_allgather_ring_ll", "nccl_other"]
METRICS = ["cudaLaunchKernel", "memcpy_htod", *NCCL]
# the report's columns: the paper's metrics of its Fig.6 in seconds, the HtoD share (negligible
# or not) and the NCCL kernels other than AllGather RING LL (FSDP's other collectives)
COMPACT: dict[str, tuple[list[str], str]] = {
    "cudaLaunchKernel [s]": (["cudaLaunchKernel"], "total_s"),
    "HtoD [s]": (["memcpy_htod"], "total_s"),
    "HtoD [%]": (["memcpy_htod"], "share_pct"),
    "AllGather RING LL [s]": (["nccl_allgather_ring_ll"], "total_s"),
    "other NCCL [s]": (["nccl_other"], "total_s"),
}


def build_table(runs: pd.DataFrame, tidy: pd.DataFrame) -> pd.DataFrame:
    t = pa.table(runs, tidy, ["gpus", "pin_memory"], METRICS)  # + kernel_launch_all
    t.insert(2, "s_per_it", t["run"].map(pa.s_per_it(runs)))
    t = t.assign(k=pa.kind_order(t))
    return t.sort_values(["gpus", "pin_memory", "k"], kind="mergesort").drop(columns="k")


def compact(t: pd.DataFrame) -> pd.DataFrame:
    """GPUs x pin_memory as rows (the paper's bars), COMPACT's columns; medians over repeats."""
    return pa.by_run(t, KEYS, COMPACT)


# {what}: what the profile recorded (CUDA API calls, or CPU ops on a CPU run)
TITLE = "Time in {what}, by pin_memory (LoRA, alpaca)"
ARTIFACT = draw_profile.artifact(build_table, TITLE, compact=compact, keys=KEYS)
