"""L7 (J Fig.15): share of time in CUDA API calls by template and method (multi-GPU).

One row per (run, metric) (analysis/profiles/artifact.py): the paper's five metrics, the
all-API kernel launches beside cudaLaunchKernel (never in a claim) and labelled CPU stand-ins.
The paper printed no numbers for this figure: there is no paper() table and no self-check.
"""

from __future__ import annotations

import pandas as pd

from analysis import common as c
from analysis.profiles import artifact as pa
from analysis.profiles import coverage as cov

FIGURE = True
KEYS = ["method", "template"]
TEMPLATES = c.LLM_TEMPLATES
METHODS = c.LLM_METHODS
METRICS = ["cudaLaunchKernel", "cudaStreamSynchronize", "memcpy_htod", "cudaEventSynchronize",
           "nccl_allgather_ring_ll"]  # fmt: skip
# the report's columns: the paper's names in its figure, share of the profiled time in percent
SHORT = {"cudaLaunchKernel": "cudaLaunchKernel", "cudaStreamSynchronize": "cudaStreamSynchronize",
         "memcpy_htod": "HtoD", "cudaEventSynchronize": "cudaEventSynchronize",
         "nccl_allgather_ring_ll": "AllGather RING LL"}  # fmt: skip


def build_table(runs: pd.DataFrame, tidy: pd.DataFrame) -> pd.DataFrame:
    """The table from the runs and their tidy profiler metrics (table() reads those from disk)."""
    # + kernel_launch_all beside cudaLaunchKernel; the claims' sums use METRICS, never it
    t = pa.table(runs, tidy, ["dataset", "method", "gpus"], METRICS)
    t = t.assign(o1=t["method"].map(METHODS.index), o2=t["dataset"].map(TEMPLATES.index),
                 k=pa.kind_order(t))  # fmt: skip
    return t.sort_values(["o1", "o2", "k"], kind="mergesort").drop(columns=["o1", "o2", "k"])


def table(runs: pd.DataFrame, profile: str) -> pd.DataFrame:
    return build_table(runs, pa.run_metrics(runs, profile))


def by_metric(t: pd.DataFrame, metrics: list[str], value: str, names: dict[str, str],
              scale: float = 1.0) -> pd.DataFrame:  # fmt: skip
    """Method x template as rows, one column per metric (`names`): the median over repeats of
    the measured runs; a cell no run measured stays empty (the notes say why), a condition
    whose runs did not finish shows their status (unsupported)."""
    keys = ["method", "template"]
    if t.empty:
        return pd.DataFrame(columns=[*keys, *names.values()])
    t = t.assign(method=t["method"].map(c.LLM_METHOD_LABELS),
                 template=t["dataset"].map(c.LLM_TEMPLATE_LABELS))  # fmt: skip
    ok = t[(t["status"] == "ok") & (t["measured"] == True) & t["metric"].isin(metrics)]  # noqa: E712
    wide = ok.assign(v=pd.to_numeric(ok[value], errors="coerce") * scale).pivot_table(
        index=[*keys, "run"], columns="metric", values="v", aggfunc="sum"
    )
    wide = wide.reindex(columns=metrics).rename(columns=names).reset_index()
    wide["status"] = "ok"
    out = c.compact(wide, keys, list(names.values())) if len(wide) else None
    conds = t[keys].drop_duplicates()
    out = conds.merge(out, on=keys, how="left") if out is not None else conds
    status = t.groupby(keys)["status"].agg(
        lambda s: None if (s == "ok").any() else "/".join(sorted(set(s.astype(str))))
    )
    failed = out.set_index(keys).index.map(status.get).to_series(index=out.index)
    for col in names.values():
        cells = out[col].astype(object) if col in out else pd.Series(None, out.index, object)
        out[col] = cells.where(failed.isna(), failed)
    rank = out["method"].map(_rank(c.LLM_METHOD_LABELS)) * 10 + out["template"].map(
        _rank(c.LLM_TEMPLATE_LABELS)
    )
    return out.iloc[rank.argsort(kind="stable")].reset_index(drop=True)


def _rank(labels: dict[str, str]) -> dict[str, int]:
    return {v: i for i, v in enumerate(labels.values())}


def compact(t: pd.DataFrame) -> pd.DataFrame:
    """Share of the profiled time [%] of the paper's five calls, per method and template."""
    return by_metric(t, METRICS, "share_pct", {m: f"{SHORT[m]} [%]" for m in METRICS})


def notes(runs: pd.DataFrame, t: pd.DataFrame) -> list[str]:
    return pa.notes(t, runs)


def gates(runs: pd.DataFrame, t: pd.DataFrame) -> dict[str, str]:
    return {"gpu": no_cuda(runs)}


def no_cuda(runs: pd.DataFrame) -> str:
    """Why a CPU run's profile holds none of the paper's CUDA calls ("" on a GPU). Shared by L9."""
    if c.on_gpu(runs):
        return ""
    return (
        f"{pa.NOT_MEASURED} ({cov.why(pa.NOT_MEASURED)}): a CPU run's torch.profiler trace holds "
        "CPU ops only"
    )
