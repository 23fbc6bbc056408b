"""Run-to-run noise, measured where the claims are judged (issues 26 and 38; README "No verdict
inside the noise").

Every set of runs in a results folder that did identical work measures spread: the seed repeats
(noise cells N1/N2, REPEATS=n) with the noise cells' run beside a busy core (run/node/busy.py),
and on a CPU each pin_memory pair (a no-op without a GPU: the losses are bit-identical) and each
NUMA pair where binding changed nothing. A quantity whose spread was not measured has an
infinite margin (`Floor.margin`). The noise cells run spread over the sweep, not back to back
(the Makefile's `.noise-k` stamps, `python -m run.sweep --only-repeat k`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from analysis import common as c
from analysis import steady as st
from run import store
from run.node import busy

TARGET = "table-noise"
# The quantities measured on every run: a summary field, a per-epoch field (one spread per
# epoch, the largest kept), or the steady-state total (analysis/common.py).
RUN_MEASURES = {
    "vision": {"total_time_s": "total", "total_time_s_steady": "steady", "images_per_s": "total",
               "train_loss": "epochs", "accuracy": "epochs"},
    "llm": {"s_per_it": "total", "total_time_s": "total", "total_time_s_steady": "steady",
            "tokens_per_s": "total", "tail_loss": "total", "optimizer_state_bytes": "total"},
}  # fmt: skip
EPOCH_FIELDS = {"train_loss": "train_loss", "accuracy": "test_accuracy_pct"}
# What a claim's value is measured by: the column a rule reads -> the run measures whose spread
# it carries (several: the largest). Ratios of times (speed-ups, efficiencies) carry their times'.
TIMES = ("total_time_s", "speedup_vs_1gpu", "efficiency_pct", "efficiency_vs_1gpu_pct",
         "efficiency_vs_fp64_pct", "efficiency_vs_unpinned_pct", "relative_improvement_pct")  # fmt: skip
VALUE_MEASURES: dict[str, dict[str, tuple[str, ...]]] = {
    "vision": {
        **{v: ("total_time_s",) for v in TIMES},
        **{f"{v}_steady": ("total_time_s_steady",) for v in TIMES},
        "images_per_s": ("images_per_s",), "throughput": ("images_per_s",),
        "train_loss": ("train_loss",),
        "test_accuracy_pct": ("accuracy",), "inference_accuracy_pct": ("accuracy",),
        "accuracy_pct": ("accuracy",),
    },
    "llm": {
        "s_per_it": ("s_per_it",), "s_per_it_steady": ("s_per_it",),
        "tokens_per_s": ("tokens_per_s",), "throughput": ("tokens_per_s",),
        # an epoch time is s/it x steps where projected, the measured train time where whole
        **{v: ("s_per_it", "total_time_s") for v in ("epoch_time_s", "tuning_time_s", *TIMES)},
        **{f"{v}_steady": ("s_per_it", "total_time_s_steady")
           for v in ("epoch_time_s", "tuning_time_s", *TIMES)},
        "loss": ("tail_loss",), "optimizer_state_bytes": ("optimizer_state_bytes",),
    },
}  # fmt: skip
# Values that divide by the 1-GPU run: their margin counts the 1-rank spread too.
VS_ONE_GPU = ("speedup_vs_1gpu", "efficiency_pct", "efficiency_vs_1gpu_pct")
# Spec fields that tell runs of identical work apart; which of them are no-ops depends on the run.
SEED, PIN, NUMA, BESIDE = "seed", "pin_memory", "numa", busy.BESIDE
KIND = {SEED: "seed repeats", PIN: "pin_memory pair (a no-op on a CPU)",
        NUMA: "NUMA binding pair (a no-op here: one node or not bound)",
        BESIDE: "a run beside a busy core"}  # fmt: skip
# Accuracy is a share bounded by 0 and 100: near chance a relative spread says nothing, so its
# spread is in points (max - min), and a margin is those points against the compared value.
POINTS = ("accuracy",)
MEASURE_LABELS = {"total_time_s": "total time", "total_time_s_steady": "steady-state time",
                  "s_per_it": "s/it", "images_per_s": "images/s", "tokens_per_s": "tokens/s",
                  "train_loss": "training loss", "accuracy": "test accuracy",
                  "tail_loss": "loss",
                  "optimizer_state_bytes": "optimizer-state bytes"}  # fmt: skip
COLUMNS = ["workload", "gpus", "measure", "kind", "median", "min", "max", "spread_pct",
           "spread_points", "runs", "experiments", "run"]  # fmt: skip


# ---------------------------------------------------------------- the runs and their work
def all_runs(scale: str, matrix: dict[str, Any]) -> pd.DataFrame:
    """Every finished run of every experiment swept into this results folder, once, with its
    spec fields, summary fields and the experiments that list it (`experiments`)."""
    frames, where = [], {}
    for eid in matrix["experiments"]:
        if not store.sweep_file(scale, eid).is_file():
            continue
        try:
            df, _ = c.experiment_runs(eid, scale)
        except c.AnalysisError:
            continue
        if len(df):
            for r in df["run"]:
                where.setdefault(r, []).append(eid)
            frames.append(df)
    if not frames:
        return pd.DataFrame()
    runs = pd.concat(frames, ignore_index=True).drop_duplicates("run")
    runs = runs[runs["status"] == "ok"].reset_index(drop=True)
    runs["experiments"] = runs["run"].map(lambda r: ", ".join(where.get(r, [])))
    return runs


def _noop_keys(run: str, scale: str, summary_device: Any) -> set[str]:
    """The spec fields that change nothing for this run: the seed always counts as a repeat, and so
    does a run beside a busy core (the same work, only the machine's load differs), pin_memory
    without a GPU, numa where the run was not bound or the machine has one node."""
    out = {SEED, BESIDE}
    if str(summary_device or "cpu") == "cpu":
        out.add(PIN)
    try:
        prov = store.read_json(store.run_dir(scale, run) / store.PROVENANCE)
        nodes = len((prov.get("hardware") or {}).get("numa_nodes") or [])
        if not (prov.get("numa") or {}).get("bound") or nodes <= 1:
            out.add(NUMA)
    except (OSError, ValueError, AttributeError):
        pass
    return out


def work_sets(runs: pd.DataFrame, scale: str) -> list[tuple[list[int], str]]:
    """Groups of runs (row positions) that did identical work, each with its kind, two runs or
    more: equal specs but for the seed and the fields that are no-ops for both."""
    if runs.empty:
        return []
    specs, noops = [], []
    for _, r in runs.iterrows():
        try:
            spec = store.read_json(store.run_dir(scale, r["run"]) / store.SPEC)
        except (OSError, ValueError):
            spec = None
        specs.append(spec if isinstance(spec, dict) else None)
        noops.append(_noop_keys(r["run"], scale, r.get("device")))
    groups: dict[Any, list[int]] = {}
    for i, spec in enumerate(specs):
        if spec is None:
            continue
        free = noops[i]
        key = (tuple(sorted(free)), tuple(sorted((k, repr(v)) for k, v in spec.items()
                                                  if k not in free)))  # fmt: skip
        groups.setdefault(key, []).append(i)
    out = []
    for members in groups.values():
        if len(members) < 2:
            continue
        differ = [k for k in (SEED, PIN, NUMA, BESIDE)
                  if len({repr(specs[i].get(k, busy.NOTHING if k == BESIDE else None))
                          for i in members}) > 1]  # fmt: skip
        kind = " and ".join(KIND[k] for k in differ) or "identical specs"
        out.append((members, kind))
    return out


def _values(run: pd.Series, scale: str, measure: str, how: str) -> list[float]:
    """One run's value(s) of a measure: one number, or one per epoch."""
    if how == "epochs":
        col = EPOCH_FIELDS[measure]
        return [float(e[col]) for e in c.epochs_of(run["run"], scale) if e.get(col) is not None]
    if how == "steady":
        times = st.step_times(run["run"], scale, run["workload"])
        total = pd.to_numeric(pd.Series([run.get("total_time_s")]), errors="coerce").iloc[0]
        got = st.steady(times, st.warmup_of(run), float(total) if total == total else None)
        v = got["steady_total_s"]
        return [float(v)] if v is not None and v == v else []
    v = pd.to_numeric(pd.Series([run.get(measure)]), errors="coerce").iloc[0]
    return [float(v)] if v == v else []


def table(runs: pd.DataFrame, scale: str) -> pd.DataFrame:
    """One row per identical-work set and measure: the runs' median, min, max and spread (for a
    per-epoch measure, of the epoch where the runs differ most)."""
    rows = []
    for members, kind in work_sets(runs, scale):
        sub = runs.iloc[members]
        workload = str(sub["workload"].iloc[0])
        for measure, how in RUN_MEASURES.get(workload, {}).items():
            per_run = [_values(r, scale, measure, how) for _, r in sub.iterrows()]
            n = min((len(v) for v in per_run), default=0)
            if n == 0:
                continue
            best = None
            for k in range(n):  # per epoch (one position for a single number)
                vals = pd.Series([v[k] if how == "epochs" else v[0] for v in per_run])
                med = float(vals.median())
                spread = 100.0 * float(vals.max() - vals.min()) / abs(med) if med else (
                    0.0 if vals.max() == vals.min() else math.inf)  # fmt: skip
                key = float(vals.max() - vals.min()) if measure in POINTS else spread
                if best is None or key > best[4]:
                    best = (med, float(vals.min()), float(vals.max()), spread, key)
            assert best is not None
            rows.append({"workload": workload, "gpus": int(sub["gpus"].iloc[0]),
                         "measure": measure, "kind": kind, "median": best[0], "min": best[1],
                         "max": best[2], "spread_pct": best[3],
                         "spread_points": best[4] if measure in POINTS else None,
                         "runs": len(sub),
                         "experiments": ", ".join(sorted(set(", ".join(sub["experiments"])
                                                             .split(", ")))),
                         "run": ", ".join(sub["run"])})  # fmt: skip
    t = pd.DataFrame(rows, columns=COLUMNS)
    return t.sort_values(["workload", "measure", "gpus", "spread_pct"],
                         ascending=[True, True, True, False]).reset_index(drop=True)  # fmt: skip


# ---------------------------------------------------------------- the floor a claim must clear
# A spread measured on a handful of sets is itself a sample: two sweeps of the same cells on this
# 2-core machine measured 57.3 % and 110.3 % for LLM s/it at 1 rank, 47.7 % and 58.3 % for vision
# time at 2 ranks (make check-verdicts). A verdict is decided only beyond twice the largest spread
# its folder measured, so that the next sweep's spread does not overturn it.
MARGIN_FACTOR = 2.0


@dataclass
class Floor:
    """The spreads measured in one results folder, and the margin each claim needs."""

    sets: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=COLUMNS))
    quiet: bool = False  # tests' made-up tables: a machine without noise (margin 0)

    def margin(self, workload: str, values: set[str], gpus: set[float],
               against_constant: bool = False) -> tuple[float | None, str, bool]:  # fmt: skip
        """(relative margin, how it was measured) for a claim of `workload` reading `values` at
        rank counts `gpus`: the largest spread of the values' measures at those rank counts,
        and at 1 rank for a ratio to the 1-GPU run set against a constant (`against_constant`;
        two such ratios at one rank count share the 1-GPU time, which cancels). None: no value
        is a measured kind of quantity (a count, bytes of a profile); inf: some measure at some
        rank count has no set of identical runs, so single runs decide nothing. The flag: the
        margin is in points (accuracy, POINTS), not relative."""
        measures, ranks = scope(workload, values, gpus, against_constant)
        if not measures:
            return None, "", False
        points = all(m in POINTS for m in measures)
        if self.quiet:
            return 0.0, "no noise (a made-up table)", points
        if not ranks:
            return math.inf, "no rank count to look up", points
        key = "spread_points" if points else "spread_pct"
        t = self.sets[self.sets["workload"] == workload] if len(self.sets) else self.sets
        missing, best = [], None
        for m in measures:
            for g in sorted(ranks):
                got = t[(t["measure"] == m) & (t["gpus"] == g)] if len(t) else t
                if got.empty:
                    missing.append(f"{MEASURE_LABELS.get(m, m)} at {g} rank(s)")
                    continue
                top = got.sort_values(key, ascending=False).iloc[0]
                if best is None or top[key] > best[key]:
                    best = top
        if missing:
            return math.inf, (f"run-to-run spread not measured ({', '.join(missing)}: no two "
                              f"runs of identical {workload} work)"), points  # fmt: skip
        assert best is not None
        value = MARGIN_FACTOR * (float(best[key]) if points else float(best[key]) / 100.0)
        return value, f"{describe_set(best)}, taken {MARGIN_FACTOR:g} times", points


def scope(workload: str, values: set[str], gpus: set[float],
          against_constant: bool = False) -> tuple[list[str], list[int]]:  # fmt: skip
    """The run measures and rank counts whose spreads a claim's margin is the largest of."""
    measures = sorted({m for v in values for m in VALUE_MEASURES.get(workload, {}).get(v, ())})
    one = {*VS_ONE_GPU, *(f"{v}_steady" for v in VS_ONE_GPU)}
    ranks = {int(g) for g in gpus if g == g} | ({1} if against_constant and values & one else set())
    return measures, sorted(ranks)


def outside(sets: pd.DataFrame, workload: str, measures: list[str], ranks: list[int],
            margin: float, points: bool) -> pd.DataFrame:  # fmt: skip
    """The sets among `sets` (a noise table) whose spread exceeds `margin` (relative, or in
    points) in the given measures and rank counts: those a verdict decided on `margin` did not
    allow for (`make check-verdicts`, analysis/check_verdicts.py)."""
    if sets.empty or math.isinf(margin):
        return sets.iloc[0:0]
    mine = sets[(sets["workload"] == workload) & sets["measure"].isin(measures)
                & sets["gpus"].isin(ranks)]  # fmt: skip
    size = mine["spread_points"] if points else mine["spread_pct"] / 100.0
    return mine[pd.to_numeric(size, errors="coerce") > margin + 1e-9]


def describe_set(row: pd.Series | dict[str, Any]) -> str:
    """The set that sets a margin, as the verdicts print it."""
    size = (f"{row['spread_points']:.1f} points" if row["measure"] in POINTS
            else f"{row['spread_pct']:.1f} %")  # fmt: skip
    m = row["measure"]
    return (f"run-to-run spread {size} ({row['workload']} {MEASURE_LABELS.get(m, m)}"
            f" at {int(row['gpus'])} rank(s): {row['experiments']}'s {row['kind']}, "
            f"{int(row['runs'])} runs)")  # fmt: skip


def measure_runs(scale: str, matrix: dict[str, Any]) -> Floor:
    """The floor of this scale's results folder: every identical-work set it holds."""
    runs = all_runs(scale, matrix)
    return Floor(table(runs, scale) if len(runs) else pd.DataFrame(columns=COLUMNS))


measure = measure_runs  # what the driver calls (the tests' sandboxes replace it by a quiet machine)


def largest(t: pd.DataFrame) -> pd.DataFrame:
    """Per workload, measure and rank count, the set with the largest spread (the margin)."""
    if t.empty:
        return t
    t = t.assign(_k=t["spread_points"].where(t["measure"].isin(POINTS), t["spread_pct"]))
    top = t.sort_values("_k", ascending=False).drop_duplicates(["workload", "measure", "gpus"])
    top = top.drop(columns="_k")
    return top.sort_values(["workload", "measure", "gpus"]).reset_index(drop=True)
