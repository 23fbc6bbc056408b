"""Shared by the six profiler artifacts (V5, V6, L3, L4, L7, L9): runs -> one tidy table.

Each profiled run left RUN/profile_metrics.csv (run/profiling.py, written by the sweep). The
artifact table has one row per (run, metric) with the run's conditions in front:

    kind        "paper metric" (J Table 1, absent ones included) or "cpu op" (a labelled CPU
                stand-in, e.g. gloo allreduce for the NCCL kernels; never mixed with the paper's)
    total_s     summed over the run's ranks (as one nsys report over all processes gives it)
    share_pct   mean over ranks of total_s / that rank's profiled wall time, in percent
    measured    False where the profile cannot hold the metric: the row says NOT_MEASURED, its
                numbers stay empty (never zero)
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pandas as pd

from analysis import common as c
from run import profiling, store

from .metrics import CPU_PREFIX, METRICS, by_metric, concat_frames, read_metrics_csv

NOT_MEASURED = "not measured on this hardware"
NOT_PROFILED = "not profiled (PROFILER=none)"
PAPER, CPU = "paper metric", "cpu op"
TOP_CPU = 3  # CPU ops shown by rank of inclusive time, beside the fixed stand-ins
# CPU-side stand-ins a CPU torch.profiler trace does hold: (label, what it stands in for, op).
CPU_PROXIES: list[tuple[str, str, re.Pattern[str]]] = [
    ("DataLoader next", "host data loading", re.compile(r"^enumerate\(DataLoader\)#.*__next__$")),
    ("aten::copy_", "host copies, memcpy stand-in", re.compile(r"^aten::copy_$")),
    ("aten::to", "dtype/device casts", re.compile(r"^aten::to$")),
    # the gloo work itself (runs on gloo's thread); c10d::allreduce_ is only its enqueue
    ("gloo allreduce", "NCCL allreduce stand-in", re.compile(r"^gloo:all_reduce$")),
    ("gloo allgather", "NCCL AllGather stand-in (FSDP)", re.compile(r"^gloo:all_gather$")),
    ("gloo broadcast", "NCCL broadcast stand-in", re.compile(r"^gloo:broadcast$")),
    ("optimizer step", "optimizer", re.compile(r"^Optimizer\.step#")),
    ("forward", "model forward", re.compile(r"^(DistributedDataParallel|FullyShardedDataParallel|\w+)\.forward$")),
]  # fmt: skip
COLUMNS = [
    "run", "status", "source", "ranks", "kind", "metric", "label", "calls", "total_s",
    "share_pct", "bytes", "measured", "note",
]  # fmt: skip


def run_metrics(runs: pd.DataFrame, profile: str) -> pd.DataFrame:
    """The tidy metrics (analysis/profiles COLUMNS) of every ok run that wrote them."""
    frames = []
    for _, r in c.ok_runs(runs).iterrows():
        path = store.run_dir(profile, r["run"]) / profiling.PROFILE_METRICS
        if path.is_file():
            frames.append(read_metrics_csv(path))
    return concat_frames(frames)


def table(
    runs: pd.DataFrame,
    tidy: pd.DataFrame,
    conditions: Sequence[str],
    metrics: Sequence[str],
    cpu: bool = True,
) -> pd.DataFrame:
    """One row per (run, metric): the paper's `metrics` (absent -> NOT_MEASURED) + CPU proxies."""
    grouped = by_metric(tidy)
    rows: list[dict[str, Any]] = []
    for _, r in runs.iterrows():
        head = {k: r[k] for k in conditions}
        base = {"run": r["run"], "status": r["status"]}
        mine = grouped[grouped["run"] == r["run"]]
        source = ",".join(sorted(set(mine["source"]))) or r.get("profiler", "")
        ranks = int(mine["rank"].nunique())
        if r["status"] != "ok":
            rows.append({**head, **base, "source": source, "ranks": 0, "kind": PAPER,
                         "metric": "", "label": "", "measured": False,
                         "note": f"run {r['status']}: {r.get('error') or ''}"[:200]})  # fmt: skip
            continue
        profiled = r.get("profiler", "torch") != "none"
        for m in metrics:
            got = mine[mine["metric"] == m]
            row = {**head, **base, "source": source, "ranks": ranks, "kind": PAPER, "metric": m,
                   "label": METRICS[m]}  # fmt: skip
            if got.empty:
                row.update(measured=False, note=NOT_MEASURED if profiled else NOT_PROFILED)
            else:
                row.update(_agg(got, ranks), measured=True, note="")
            rows.append(row)
        if not cpu:
            continue
        cpu_rows = mine[mine["metric"].str.startswith(CPU_PREFIX)]
        for label, stands_for, pattern in CPU_PROXIES:
            got = cpu_rows[cpu_rows["metric"].str[len(CPU_PREFIX) :].str.match(pattern)]
            if got.empty:
                continue
            # several ops may match (forward of nested modules): take the outermost (largest)
            got = got.sort_values("total_s", ascending=False).head(1)
            rows.append({**head, **base, "source": source, "ranks": ranks, "kind": CPU,
                         "metric": got["metric"].iloc[0], "label": f"{label} ({stands_for})",
                         **_agg(mine[mine["metric"] == got["metric"].iloc[0]], ranks),
                         "measured": True, "note": "CPU op, inclusive time"})  # fmt: skip
        # and the top CPU ops by inclusive time, whatever they are (ProfilerStep is the window)
        taken = {row["metric"] for row in rows if row["run"] == r["run"]}
        top = cpu_rows[~cpu_rows["metric"].isin(taken | {CPU_PREFIX + "ProfilerStep"})]
        for m in top.groupby("metric")["total_s"].sum().nlargest(TOP_CPU).index:
            rows.append({**head, **base, "source": source, "ranks": ranks, "kind": CPU,
                         "metric": m, "label": f"top CPU op: {m[len(CPU_PREFIX):][:40]}",
                         **_agg(mine[mine["metric"] == m], ranks),
                         "measured": True, "note": "CPU op, inclusive time"})  # fmt: skip
    out = pd.DataFrame(rows)
    for col in COLUMNS:
        if col not in out:
            out[col] = pd.NA
    return out[[*conditions, *COLUMNS]]


def _agg(got: pd.DataFrame, ranks: int) -> dict[str, Any]:
    nbytes = got["bytes"].dropna()
    return {
        "calls": int(got["calls"].sum()),
        "total_s": float(got["total_s"].sum()),
        "share_pct": 100.0 * float(got["share"].sum()) / max(ranks, 1),
        "bytes": int(nbytes.sum()) if len(nbytes) else pd.NA,
    }


def value(t: pd.DataFrame, metric: str, col: str = "total_s", **conds: Any) -> float | None:
    """One measured number of the table (None if absent or not measured)."""
    sel = t[(t["metric"] == metric) & (t["measured"] == True)]  # noqa: E712 - pandas mask
    for k, v in conds.items():
        sel = sel[sel[k] == v]
    if sel.empty or pd.isna(sel[col].iloc[0]):
        return None
    return float(sel[col].iloc[0])


def measured(t: pd.DataFrame, metrics: Sequence[str]) -> bool:
    """True when every listed metric was measured in at least one run."""
    ok = t[(t["kind"] == PAPER) & (t["measured"] == True)]  # noqa: E712
    return all((ok["metric"] == m).any() for m in metrics)


def unmeasured_claim(cid: str, text: str, criterion: str, metrics: Sequence[str]) -> dict:
    names = ", ".join(METRICS[m] for m in metrics)
    return c.claim(
        cid, text, criterion, c.UNMEASURED, f"{names}: {NOT_MEASURED} (no CUDA in the profile)"
    )


def notes(t: pd.DataFrame, runs: pd.DataFrame) -> list[str]:
    """What the profile could and could not hold, and which profiler made it."""
    out = []
    sources = sorted(set(",".join(t["source"].dropna().astype(str)).split(",")) - {""})
    out.append(
        f"Profiler used: {', '.join(sources) or 'none'} (PROFILER=auto picks nsys when on the PATH)."
    )
    if not c.on_gpu(runs):
        out.append(
            "CPU run: torch.profiler traces hold CPU ops only, so every CUDA metric of the paper "
            f"(memcpy, cudaLaunchKernel, cudaStreamSynchronize, NCCL kernels) is {NOT_MEASURED}. "
            "The 'cpu op' rows are labelled CPU stand-ins (gloo allreduce for NCCL, host copies, "
            "DataLoader next), inclusive times that nest, not the paper's metrics."
        )
    bad = runs[runs["status"] != "ok"]
    if len(bad):
        out.append(
            f"{len(bad)} run(s) not ok: "
            + "; ".join(f"{r['run']}: {r['status']}" for _, r in bad.iterrows())
        )
    return out


def fmt(x: float | None, unit: str = "s") -> str:
    return "n/a" if x is None else f"{x:.3g} {unit}".strip()


def summed(
    t: pd.DataFrame, metrics: Sequence[str], col: str = "total_s", **conds: Any
) -> float | None:
    """Sum of several metrics for one condition; None unless at least one was measured."""
    vals = [value(t, m, col, **conds) for m in metrics]
    got = [v for v in vals if v is not None]
    return sum(got) if got else None
