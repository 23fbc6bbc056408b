"""Steady-state timing (issue 38): a run's rate after its warm-up steps, with its spread.

A run's timed total counts its first steps, which pay for lazy initialisation, the allocator's
first requests and autograd's first graph: on a CPU smoke run of a few steps that warm-up is a
large share of the total (L6's 2-rank LoRA epoch: about 0.38 of 0.66 s). Where it is more than
WARMUP_LIMIT_PCT of a run's timed total, a timed verdict uses the steady-state rate instead: the
mean step time after the warm-up steps, with its within-run spread.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from analysis.claims import spec as cs
from run import store

WARMUP_LIMIT_PCT = cs.WARMUP_LIMIT_PCT
# The LLM spec names its warm-up (warmup_steps, the learning-rate warm-up the paper's 100 steps
# are); a vision spec names none, so its first batches are taken as its warm-up. Either is capped
# at a quarter of the run's steps, as run/llm/metrics.py's s/it does, so that a short run still
# averages over most of its steps.
VISION_WARMUP_BATCHES = 2
STEADY_COLUMNS = ["steady_s_per_step", "steady_spread_pct", "warmup_steps_timed",
                  "warmup_excess_s", "warmup_share_pct"]  # fmt: skip


def timing_warmup(warmup_steps: int, steps: int) -> int:
    """Leading steps left out of the steady-state rate: the named warm-up, at most a quarter."""
    return max(0, min(int(warmup_steps), steps // 4))


def step_times(run: str, scale: str, workload: str) -> list[float]:
    """The run's per-step wall times in order: an LLM run's steps.jsonl (each step from the end of
    the previous one, data loading included), a vision run's per-batch times on rank 0, read from
    its timeline (store.TIMELINE): each batch from the end of the previous trained batch (or the
    epoch's start) to the end of its own step, so loading and the copy count. Either without the
    seconds torch.profiler spent writing its trace in that step (`profiler_s`). [] if not recorded."""
    d = store.run_dir(scale, run)
    try:
        if workload == "llm":
            return [float(r["time_s"]) - float(r.get("profiler_s") or 0.0)
                    for r in store.read_jsonl(d / store.STEPS)]  # fmt: skip
        rows = store.read_jsonl(store.timeline_file(d, 0))
    except (OSError, ValueError, KeyError, TypeError):
        return []
    out: list[float] = []
    for e in sorted((r for r in rows if r.get("phase") == "epoch"), key=lambda r: r["epoch"]):
        t = float(e["t0"])
        steps = [r for r in rows if r.get("phase") == "train_step" and r.get("epoch") == e["epoch"]]
        for s in sorted(steps, key=lambda r: r["t1"]):
            out.append(float(s["t1"]) - t - float(s.get("profiler_s") or 0.0))
            t = float(s["t1"])
    return out


def steady(times: list[float], warmup: int, total: float | None) -> dict[str, float | None]:
    """The steady-state numbers of one run from its step times: the mean step time after the
    `warmup` first steps, its within-run spread (100 x twice the standard error of that mean
    over the mean: the mean's uncertainty, not the steps' scatter), what the warm-up steps took
    beyond the steady rate (s, and in % of the timed `total`), and the timed total at the steady
    rate (`total` less that excess) with its range from the spread."""
    out: dict[str, float | None] = dict.fromkeys([*STEADY_COLUMNS, "steady_total_s",
                                                  "steady_total_lo", "steady_total_hi"])  # fmt: skip
    w = timing_warmup(warmup, len(times))
    rest = times[w:]
    if not rest:
        return out
    mean = sum(rest) / len(rest)
    out["steady_s_per_step"], out["warmup_steps_timed"] = mean, float(w)
    half = math.nan
    if len(rest) > 1:
        sd = math.sqrt(sum((x - mean) ** 2 for x in rest) / (len(rest) - 1))
        half = 2 * sd / math.sqrt(len(rest))
        out["steady_spread_pct"] = 100 * half / mean if mean else math.nan
    excess = max(0.0, sum(times[:w]) - w * mean)
    out["warmup_excess_s"] = excess
    if total is None or not math.isfinite(total) or total <= 0:
        total = sum(times)
    out["warmup_share_pct"] = 100 * excess / total
    out["steady_total_s"] = total - excess
    if math.isfinite(half):
        out["steady_total_lo"] = total - excess - len(times) * half
        out["steady_total_hi"] = total - excess + len(times) * half
    return out


def warmup_of(row: pd.Series | dict[str, Any]) -> int:
    """The warm-up steps a run's spec names (LLM), or the vision default."""
    if row.get("workload") == "llm":
        w = row.get("warmup_steps")
        return int(w) if w is not None and w == w else 0
    return VISION_WARMUP_BATCHES


def with_steady(df: pd.DataFrame, scale: str, total_col: str, out: str) -> pd.DataFrame:
    """`df` (one row per run, spec and summary fields) with the steady-state columns: STEADY_COLUMNS,
    `<out>_steady` (the timed total `total_col` at the steady rate) and its `_lo`/`_hi` (the
    within-run spread), for the runs that finished and recorded their step times."""
    df = df.copy()
    rows = []
    for _, r in df.iterrows():
        ok = r.get("status") == "ok" and isinstance(r.get("run"), str)
        times = step_times(r["run"], scale, r.get("workload", "vision")) if ok else []
        total = pd.to_numeric(pd.Series([r.get(total_col)]), errors="coerce").iloc[0]
        rows.append(steady(times, warmup_of(r), float(total) if total == total else None))
    s = pd.DataFrame(rows, index=df.index)
    named = {c: c for c in STEADY_COLUMNS}
    for x in ("", "_lo", "_hi"):
        named[f"{out}_steady{x}"] = f"steady_total{x or '_s'}"
    for col, src in named.items():
        df[col] = s[src] if len(s) else None
    return df


STEADY_SHOWN = ["warmup_share_pct", "steady_spread_pct"]  # beside the steady twins in a table


def steady_cols(df: pd.DataFrame, *values: str) -> list[str]:
    """The steady-state twins of `values` that `df` has, each with its within-run range, and
    the warm-up share and spread columns: what a timed table adds to its columns."""
    out = [f"{v}_steady{s}" for v in values for s in ("", "_lo", "_hi") if f"{v}_steady{s}" in df]
    return out + [col for col in STEADY_SHOWN if col in df]


def llm_steady(df: pd.DataFrame, scale: str) -> pd.DataFrame:
    """LLM runs with their steady-state numbers: `s_per_it_steady` (the mean step time after the
    spec's warm-up steps, which is the summary's s/it) with its within-run range, and
    `epoch_time_s_steady`: a projected epoch time is s/it x steps already, a measured whole
    epoch less what its warm-up steps took beyond the steady rate. The warm-up share is that
    excess over the run's measured train time (total_time_s)."""
    if df.empty:
        return df
    df = with_steady(df, scale, "total_time_s", "total_time_s")
    mean = pd.to_numeric(df["steady_s_per_step"], errors="coerce")
    half = mean * pd.to_numeric(df["steady_spread_pct"], errors="coerce") / 100.0
    df["s_per_it_steady"] = mean
    df["s_per_it_steady_lo"], df["s_per_it_steady_hi"] = mean - half, mean + half
    projected = df.get("epoch_time_projected", pd.Series(False, index=df.index))
    projected = projected.astype(object).where(projected.notna(), False).astype(bool)
    steps = pd.to_numeric(df.get("steps_per_epoch"), errors="coerce")
    epoch = pd.to_numeric(df.get("epoch_time_s"), errors="coerce")
    excess = pd.to_numeric(df["warmup_excess_s"], errors="coerce")
    n_steps = pd.to_numeric(df.get("steps"), errors="coerce")
    whole = epoch - excess
    for s, v, w in (("", mean, whole), ("_lo", mean - half, whole - n_steps * half),
                    ("_hi", mean + half, whole + n_steps * half)):  # fmt: skip
        df[f"epoch_time_s_steady{s}"] = (v * steps).where(projected, w)
    return df.drop(columns=[f"total_time_s_steady{s}" for s in ("", "_lo", "_hi")])
