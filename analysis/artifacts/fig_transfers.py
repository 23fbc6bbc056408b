"""L9 (J Fig.17): bytes moved per direction (HtoD, DtoD, DtoH) by template and method.

One row per (run, metric) (analysis/profiles/artifact.py): the three memcpy directions with their
bytes, and labelled CPU stand-ins (host copies) on CPU runs. The paper printed no numbers for this
figure: there is no paper() table and no self-check.
"""

from __future__ import annotations

import pandas as pd

from analysis.profiles import artifact as pa
from analysis.profiles.metrics import MEMCPY_METRICS
from run.llm.spec import METHODS, TEMPLATE_DATASETS

FIGURE = True
KEYS = ["method", "template"]
DIRECTIONS = ["memcpy_htod", "memcpy_dtod", "memcpy_dtoh"]  # the paper's order
NAMES = {"memcpy_htod": "HtoD [MB]", "memcpy_dtod": "DtoD [MB]", "memcpy_dtoh": "DtoH [MB]"}
MB = 1e6


def build_table(runs: pd.DataFrame, tidy: pd.DataFrame) -> pd.DataFrame:
    """The table from the runs and their tidy profiler metrics (table() reads those from disk)."""
    t = pa.table(runs, tidy, ["dataset", "method", "gpus"], list(MEMCPY_METRICS), cpu=True)
    t = t.assign(o1=t["method"].map(METHODS.index), o2=t["dataset"].map(TEMPLATE_DATASETS.index))
    return t.sort_values(["o1", "o2", "kind"], kind="mergesort").drop(columns=["o1", "o2"])


def table(runs: pd.DataFrame, profile: str) -> pd.DataFrame:
    return build_table(runs, pa.run_metrics(runs, profile))


def compact(t: pd.DataFrame) -> pd.DataFrame:
    """Megabytes moved per direction in the profiled window, per method and template."""
    return pa.by_method_template(t, DIRECTIONS, "bytes", NAMES, scale=1 / MB)


def notes(runs: pd.DataFrame, t: pd.DataFrame) -> list[str]:
    return pa.notes(t, runs)


def copies_measured(t: pd.DataFrame) -> bool:
    """Whether some run's profile measured a CUDA memcpy direction (bytes): a GPU profile."""
    if t.empty:
        return False
    rows = t[(t["kind"] == pa.PAPER) & t["metric"].isin(DIRECTIONS)]
    return bool((rows["measured"].astype(str) == "True").any())


def title(runs: pd.DataFrame, t: pd.DataFrame) -> str:
    """Bytes per direction where the profile has CUDA copies; on a CPU run, what it has."""
    if copies_measured(t):
        return "Bytes moved per direction (CUDA memcpy) by template and method"
    return "Host copy time (aten::copy_; no CUDA copies, so no bytes) by template and method"


def gates(runs: pd.DataFrame, t: pd.DataFrame) -> dict[str, str]:
    return {"gpu": pa.gpu_gate(runs)}
