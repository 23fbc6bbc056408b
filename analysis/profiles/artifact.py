"""Shared by the six profiler artifacts (V5, V6, L3, L4, L7, L9): runs -> one tidy table.

Each profiled run left RUN/profile_metrics.csv. The table has one row per (run, metric), the run's
conditions in front:
    kind        "paper metric" (J Table 1, absent ones included), "extra metric" (kernel launches
                through every API, right after cudaLaunchKernel) or "cpu op" (a labelled CPU
                stand-in, e.g. gloo allreduce for the NCCL kernels; never mixed with the paper's)
    total_s     summed over the run's ranks (as one nsys report over all processes gives it)
    share_pct   mean over ranks of total_s / that rank's profiled wall time, in percent
    measured    False where the profile cannot hold the metric (CPU run, or a metric the profiler
                never records): the note says which, the numbers stay empty (never zero). A
                metric a GPU run's profile simply lacks is measured as 0 (coverage.py).
Claims are judged on the paper's metrics only.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd

from analysis import common as c
from run import store
from run.llm.catalog import TEMPLATE_LABELS
from run.llm.spec import METHOD_LABELS
from run.node import profiling

from . import coverage as cov
from . import metrics as mt
from .coverage import NOT_CALLED, NOT_MEASURED, NOT_PROFILED  # artifacts read them here too

PAPER, EXTRA, CPU = "paper metric", "extra metric", "cpu op"
# Sort rank of each kind: paper and extra rows share one rank so that a stable sort keeps
# kernel_launch_all right after cudaLaunchKernel; the CPU stand-ins follow them.
KIND_ORDER = {PAPER: 0, EXTRA: 0, CPU: 1}
# The all-API launch count differs "a lot" from cudaLaunchKernel above this ratio of calls.
LAUNCH_RATIO_NOTE = 1.5
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


def run_metrics(runs: pd.DataFrame, scale: str) -> pd.DataFrame:
    """The tidy metrics of every ok run that wrote them."""
    rows = []
    for _, r in c.ok_runs(runs).iterrows():
        path = store.run_dir(scale, r["run"]) / profiling.PROFILE_METRICS
        if path.is_file():
            rows += mt.read_metrics_rows(path)
    return pd.DataFrame.from_records(mt.sort_rows(rows), columns=mt.TidyRow._fields)


def with_launch_all(metrics: Sequence[str]) -> list[str]:
    """`metrics` with KERNEL_LAUNCH_ALL right after cudaLaunchKernel (unchanged without it)."""
    out = [m for m in metrics if m != mt.KERNEL_LAUNCH_ALL]
    if "cudaLaunchKernel" in out:
        out.insert(out.index("cudaLaunchKernel") + 1, mt.KERNEL_LAUNCH_ALL)
    return out


def kind_order(t: pd.DataFrame) -> pd.Series:
    """Sort key for the `kind` column."""
    return t["kind"].map(KIND_ORDER).fillna(len(KIND_ORDER))


def table(
    runs: pd.DataFrame,
    tidy: pd.DataFrame,
    conditions: Sequence[str],
    metrics: Sequence[str],
    cpu: bool = True,
) -> pd.DataFrame:
    """One row per (run, metric): the paper's `metrics`, kernel_launch_all and CPU proxies; an
    absent metric is NOT_PROFILED, NOT_MEASURED, not recorded, NO_CUDA_IN_PROFILE or 0."""
    cells = tidy[mt.COLUMNS].astype(object)
    tidy_rows = (mt.TidyRow(*r) for r in cells.where(cells.notna(), None).itertuples(index=False))
    grouped = pd.DataFrame(mt.metric_totals(tidy_rows), columns=mt.MetricTotal._fields)
    rows: list[dict[str, Any]] = []
    for _, r in runs.iterrows():
        mine = grouped[grouped["run"] == r["run"]]
        ranks = int(mine["rank"].nunique())
        base = {**{k: r[k] for k in conditions}, "run": r["run"], "status": r["status"],
                "source": ",".join(sorted(set(mine["source"]))) or r.get("profiler", ""),
                "ranks": ranks}  # fmt: skip
        if r["status"] != "ok":
            rows.append({**base, "ranks": 0, "kind": PAPER, "metric": "", "label": "",
                         "measured": False,
                         "note": f"run {r['status']}: {r.get('error') or ''}"[:200]})  # fmt: skip
            continue
        absent = _absent(r, mine)
        for m in with_launch_all(metrics):
            got = mine[mine["metric"] == m]
            kind = PAPER if m in mt.METRICS else EXTRA
            cells = absent(m) if got.empty else {**_agg(got, ranks), "measured": True, "note": ""}
            rows.append({**base, "kind": kind, "metric": m, "label": mt.LABELS[m], **cells})
        if not cpu:
            continue

        cpu_rows = mine[mine["metric"].str.startswith(mt.CPU_PREFIX)]
        picks = []
        for label, stands_for, pattern in CPU_PROXIES:
            got = cpu_rows[cpu_rows["metric"].str[len(mt.CPU_PREFIX) :].str.match(pattern)]
            if not got.empty:
                # several ops may match (forward of nested modules): take the outermost (largest)
                top_op = got.sort_values("total_s", ascending=False)["metric"].iloc[0]
                picks.append((top_op, f"{label} ({stands_for})"))
        # and the top CPU ops by inclusive time, whatever they are (ProfilerStep is the window)
        taken = {row["metric"] for row in rows if row["run"] == r["run"]} | {m for m, _ in picks}
        top = cpu_rows[~cpu_rows["metric"].isin(taken | {mt.CPU_PREFIX + "ProfilerStep"})]
        for m in top.groupby("metric")["total_s"].sum().nlargest(TOP_CPU).index:
            picks.append((m, f"top CPU op: {m[len(mt.CPU_PREFIX) :][:40]}"))
        for m, label in picks:
            rows.append({**base, "kind": CPU, "metric": m, "label": label,
                         **_agg(mine[mine["metric"] == m], ranks), "measured": True,
                         "note": "CPU op, inclusive time"})  # fmt: skip
    out = pd.DataFrame(rows)
    for col in COLUMNS:
        if col not in out:
            out[col] = pd.NA
    return out[[*conditions, *COLUMNS]]


def _absent(r: pd.Series, mine: pd.DataFrame) -> Callable[[str], dict[str, Any]]:
    if r.get("profiler", "torch") == "none":
        return lambda m: {"measured": False, "note": NOT_PROFILED}
    cpu_run = cov.is_cpu_device(r.get("device"))
    if cpu_run is None:  # no device recorded: a profile with CUDA rows came from a GPU run
        cpu_run = not cov.has_cuda(mine["metric"])
    if cpu_run:
        return lambda m: {"measured": False, "note": NOT_MEASURED}
    sources = sorted(set(mine["source"])) or [str(r.get("profiler", ""))]
    blind = cov.unrecordable(sources)
    cuda = cov.has_cuda(mine["metric"])

    def cells(m: str) -> dict[str, Any]:
        if m in blind:
            # every profiler in use is blind to m (a run has one; with several, the first named)
            return {"measured": False, "note": cov.not_recorded(sources[0])}
        if not cuda:  # a GPU run whose profile saw no CUDA at all: a 0 would be a guess
            return {"measured": False, "note": cov.NO_CUDA_IN_PROFILE}
        # the profiler could record it and saw the GPU, so the run really did not call it
        nbytes = 0 if m in mt.MEMCPY_METRICS else pd.NA
        return {"calls": 0, "total_s": 0.0, "share_pct": 0.0, "bytes": nbytes,
                "measured": True, "note": NOT_CALLED}  # fmt: skip

    return cells


def _agg(got: pd.DataFrame, ranks: int) -> dict[str, Any]:
    nbytes = got["bytes"].dropna()
    return {
        "calls": int(got["calls"].sum()),
        "total_s": float(got["total_s"].sum()),
        "share_pct": 100.0 * float(got["share"].sum()) / max(ranks, 1),
        "bytes": int(nbytes.sum()) if len(nbytes) else pd.NA,
    }


def gpu_gate(runs: pd.DataFrame) -> str:
    """The `gpu` gate's reason: why a CPU run's profile holds no CUDA metric ("" on a GPU)."""
    if c.on_gpu(runs):
        return ""
    return (
        f"{NOT_MEASURED} ({cov.why(NOT_MEASURED)}): a CPU run's torch.profiler trace holds CPU "
        "ops only, no CUDA call, copy or NCCL kernel"
    )


def recorded_gates(t: pd.DataFrame, metrics: Sequence[str]) -> dict[str, str]:
    """Gates `records_<metric>` (snake case): each of `metrics` no run measured because the
    profiler cannot record it (cudaEventDestroy under torch.profiler), with the reason. A CPU
    run's absences are the `gpu` gate's."""
    out: dict[str, str] = {}
    paper = t[t["kind"] == PAPER] if len(t) else t
    for m in metrics:
        rows = paper[paper["metric"] == m] if len(paper) else paper
        if rows.empty or (rows["measured"] == True).any():  # noqa: E712 - pandas mask
            continue
        notes_ = [n for n in dict.fromkeys(rows["note"].dropna().astype(str))
                  if n.startswith("not recorded by ")]  # fmt: skip
        if notes_:
            why = cov.why(notes_[0])
            gate = "records_" + re.sub(r"(?<!^)(?=[A-Z])", "_", m).lower()  # records_cuda_event_...
            out[gate] = f"{m}: {notes_[0]}" + (f" ({why})" if why else "")
    return out


def per_run(
    t: pd.DataFrame, keys: Sequence[str], columns: dict[str, tuple[Sequence[str], str]]
) -> pd.DataFrame:
    """One row per finished run: `keys`, then per column (name -> (metrics, "total_s" or
    "share_pct")) the sum over its measured paper metrics; empty (never 0) where none was."""
    keys = list(keys)
    if t.empty or "run" not in t:
        return pd.DataFrame(columns=[*keys, "run", *columns, "status"])
    done = t[t["status"] == "ok"]
    ok = done[(done["kind"] == PAPER) & (done["measured"] == True)]  # noqa: E712
    out = done[[*keys, "run"]].drop_duplicates()
    for col, (metrics, value) in columns.items():
        sel = ok[ok["metric"].isin(list(metrics))]
        vals = pd.to_numeric(sel[value], errors="coerce")
        s = vals.groupby([sel[k] for k in [*keys, "run"]], dropna=False).sum(min_count=1)
        out = out.merge(s.rename(col).reset_index(), on=[*keys, "run"], how="left")
    return out.assign(status="ok").reset_index(drop=True)


def notes(runs: pd.DataFrame, t: pd.DataFrame) -> list[str]:
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
    out += _absence_notes(t) + _launch_notes(t)
    bad = runs[runs["status"] != "ok"]
    if len(bad):
        out.append(
            f"{len(bad)} run(s) not ok: "
            + "; ".join(f"{r['run']}: {r['status']}" for _, r in bad.iterrows())
        )
    return out


def _absence_notes(t: pd.DataFrame) -> list[str]:
    out = []
    if "note" not in t or t.empty:
        return out
    paper = t[t["kind"].isin([PAPER, EXTRA])]
    for note in dict.fromkeys(paper["note"].dropna().astype(str)):
        if not note.startswith("not recorded by "):
            continue
        names = sorted(set(paper.loc[paper["note"] == note, "metric"]))
        why = cov.why(note)
        out.append(f"{', '.join(names)}: {note} on GPU runs" + (f" ({why})." if why else "."))
    zero = sorted(set(paper.loc[paper["note"] == NOT_CALLED, "metric"]))
    if zero:
        out.append(
            f"{', '.join(zero)}: 0 in some GPU runs, which recorded CUDA activity but no such "
            "call (e.g. no NCCL kernel on 1 GPU): a real 0, not a gap in the profile."
        )
    return out


def _launch_notes(t: pd.DataFrame) -> list[str]:
    ok = t[t["measured"] == True]  # noqa: E712
    if "metric" not in t or not (ok["metric"] == mt.KERNEL_LAUNCH_ALL).any():
        return []  # no GPU profile: the CPU note already says why
    out = [
        f"{mt.KERNEL_LAUNCH_ALL} ({mt.LABELS[mt.KERNEL_LAUNCH_ALL]}) is shown beside the paper's "
        "cudaLaunchKernel: recent cuBLAS, cuDNN and NCCL launch many kernels through the other "
        "APIs. Claims use cudaLaunchKernel, as the paper does."
    ]
    calls = ok.pivot_table(index="run", columns="metric", values="calls", aggfunc="sum")
    if {"cudaLaunchKernel", mt.KERNEL_LAUNCH_ALL} <= set(calls.columns):
        pair = calls[["cudaLaunchKernel", mt.KERNEL_LAUNCH_ALL]].dropna()
        paper, every = pair["cudaLaunchKernel"], pair[mt.KERNEL_LAUNCH_ALL]
        # launches but none through cudaLaunchKernel: infinitely far apart; none at all: equal
        ratio = (every / paper.where(paper > 0)).fillna(float("inf")).where(every > 0, 1.0)
        far = ratio[ratio > LAUNCH_RATIO_NOTE]
        if len(far):
            out.append(
                f"In {len(far)} of {len(ratio)} runs the launches through all APIs exceed the "
                f"cudaLaunchKernel calls by more than {LAUNCH_RATIO_NOTE:g}x (up to "
                f"{far.max():.3g}x): cudaLaunchKernel misses many of these runs' kernels."
            )
    return out


def by_method_template(t: pd.DataFrame, metrics: list[str], value: str, names: dict[str, str],
              scale: float = 1.0) -> pd.DataFrame:  # fmt: skip
    """Method x template as rows, one column per metric (`names`): the median over repeats of
    the measured runs; empty where none was, the status where no run finished."""
    keys = ["method", "template"]
    if t.empty:
        return pd.DataFrame(columns=[*keys, *names.values()])
    t = t.assign(method=t["method"].map(METHOD_LABELS),
                 template=t["dataset"].map(TEMPLATE_LABELS))  # fmt: skip
    ok = t[(t["status"] == "ok") & (t["measured"] == True) & t["metric"].isin(metrics)]  # noqa: E712
    wide = ok.assign(v=pd.to_numeric(ok[value], errors="coerce") * scale).pivot_table(
        index=[*keys, "run"], columns="metric", values="v", aggfunc="sum"
    )
    wide = wide.reindex(columns=metrics).rename(columns=names).reset_index()
    wide["status"] = "ok"
    out = c.compact(wide, keys, list(names.values())) if len(wide) else None
    conds = t[keys].drop_duplicates()
    out = conds.merge(out, on=keys, how="left") if out is not None else conds
    status = _status(t, keys)
    failed = out.set_index(keys).index.map(status.get).to_series(index=out.index)
    for col in names.values():
        cells = out[col].astype(object) if col in out else pd.Series(None, out.index, object)
        out[col] = cells.where(failed.isna(), failed)
    rank = out["method"].map(_label_rank(METHOD_LABELS)) * 10 + out["template"].map(
        _label_rank(TEMPLATE_LABELS)
    )
    return out.iloc[rank.argsort(kind="stable")].reset_index(drop=True)


def _status(t: pd.DataFrame, keys: list[str]) -> pd.Series:
    """Per condition: None where a run finished, else its runs' statuses."""
    return t.groupby(keys)["status"].agg(
        lambda s: None if (s == "ok").any() else "/".join(sorted(set(s.astype(str))))
    )


def _label_rank(labels: dict[str, str]) -> dict[str, int]:
    return {v: i for i, v in enumerate(labels.values())}


def s_per_it(runs: pd.DataFrame) -> dict[str, float | None]:
    """run -> its s/it (None where the summary has none)."""
    its = runs["s_per_it"] if "s_per_it" in runs else pd.Series([None] * len(runs))
    return dict(zip(runs["run"], its, strict=True))


def by_run(t: pd.DataFrame, keys: list[str], columns: dict) -> pd.DataFrame:
    """`keys` as rows, `columns` (as per_run's) and s/it as columns, medians over repeats; a
    condition none of whose runs finished shows their status in every cell."""
    per = per_run(t, keys, columns)
    its = t.drop_duplicates("run").set_index("run")["s_per_it"] if len(t) else pd.Series()
    per = per.assign(**{"s/it": pd.to_numeric(per["run"].map(its), errors="coerce")})
    values = [*columns, "s/it"]
    out = c.compact(per, keys, values)
    if t.empty:
        return out
    status = _status(t, keys)
    failed = status.dropna()
    if len(failed):
        rows = failed.index.to_frame(index=False)
        for col in values:
            rows[col] = failed.to_numpy()
        out = pd.concat([out, rows], ignore_index=True).sort_values(keys, kind="mergesort")
    return out.reset_index(drop=True)
