"""Run-to-run noise: how far identical runs of one cheap cell differ, the floor every timing
verdict is judged against (issue 26).

Experiments N1 (vision) and N2 (LLM) of experiments/matrix.yaml run one cell of each workload
three times (seeds 0-2, as REPEATS=3 would) at 1 rank and at the most. A cell's spread is
(max - min) / median of its timed quantity; a workload's margin is the largest spread over its
rank counts. The claims engine (analysis/claims/rules.py) then calls a comparison of single
runs that differs by less than that margin inconclusive; cells with repeats of their own are
judged by their own min-max instead.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from analysis import common as c

TARGET = "table-noise"
# the timed quantity of each workload's noise cell, as the artifacts' timing claims read it
QUANTITY = {"vision": "total_time_s", "llm": "s_per_it"}
COLUMNS = ["workload", "gpus", "quantity", "median", "min", "max", "spread_pct", "runs",
           "run"]  # fmt: skip


def experiments(matrix: dict[str, Any]) -> dict[str, str]:
    """workload -> the noise experiment of that workload (N1, N2), from the matrix."""
    return {
        e["workload"]: eid for eid, e in matrix["experiments"].items() if e.get("target") == TARGET
    }


def table(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per workload and rank count: the timed quantity's median, min, max and spread."""
    rows = []
    ok = c.ok_runs(runs) if len(runs) else runs
    for workload, col in QUANTITY.items():
        mine = ok[ok["workload"] == workload] if "workload" in ok else ok.iloc[0:0]
        if col not in mine:
            continue
        for g, cell in mine.groupby("gpus"):
            v = pd.to_numeric(cell[col], errors="coerce").dropna()
            if v.empty:
                continue
            med = float(v.median())
            spread = 100.0 * float(v.max() - v.min()) / med if med and len(v) > 1 else math.nan
            rows.append({"workload": workload, "gpus": int(g), "quantity": col, "median": med,
                         "min": float(v.min()), "max": float(v.max()), "spread_pct": spread,
                         "runs": len(v), "run": ", ".join(cell["run"])})  # fmt: skip
    return pd.DataFrame(rows, columns=COLUMNS)


def margins(t: pd.DataFrame) -> dict[str, float]:
    """workload -> relative margin (0.05 = 5 %): the largest spread over its rank counts; a
    workload whose cells have fewer than two finished runs gets inf (no verdict can be firm)."""
    out = {}
    for workload in QUANTITY:
        mine = t[t["workload"] == workload]
        if mine.empty or (mine["runs"] < 2).any():
            out[workload] = math.inf
        else:
            out[workload] = float(mine["spread_pct"].max()) / 100.0
    return out


def measure_runs(profile: str, matrix: dict[str, Any]) -> tuple[pd.DataFrame, dict[str, float]]:
    """The noise table of this profile's results and the margins; inf margins where the noise
    runs are missing (a results folder made before the noise experiments existed)."""
    frames = []
    for workload, eid in experiments(matrix).items():
        try:
            df, _ = c.experiment_runs(eid, profile)
        except c.AnalysisError:
            continue
        frames.append(df.assign(workload=workload))
    runs = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    t = table(runs)
    return t, margins(t)


measure = measure_runs  # what the driver calls (the tests' sandboxes replace it by a quiet machine)


def describe(workload: str, margin: float | None) -> str:
    """The noise floor as the verdicts print it."""
    if margin is None:
        return ""
    if math.isinf(margin):
        return f"run-to-run noise not measured ({TARGET} has no repeated {workload} runs)"
    return f"run-to-run spread {100 * margin:.1f} % ({workload}, {TARGET})"
