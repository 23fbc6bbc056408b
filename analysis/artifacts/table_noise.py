"""N1/N2 and every other set of identical runs (ours): the run-to-run spread each verdict clears.

Not a figure of the papers: the floor every verdict is judged against (analysis/noise.py). A row
per quantity and set of runs that did identical work (the noise cells' seeds, spread over the
sweep, one beside a busy core; on a CPU each pin_memory pair and each NUMA pair that bound
nothing); the report keeps the largest spread per workload, quantity and rank count: the margin
single runs must clear.
"""

from __future__ import annotations

import pandas as pd

from analysis import noise
from analysis.driver import Artifact
from run.sweep import matrix as mx

TITLE = "Run-to-run spread between runs of identical work (the verdicts' margins)"
KEYS = ["workload", "measure", "gpus"]


def table(runs: pd.DataFrame, scale: str) -> pd.DataFrame:
    return noise.measure_runs(scale, mx.load_matrix()).sets


def compact(t: pd.DataFrame) -> pd.DataFrame:
    """Per workload, quantity and rank count the set with the largest spread: the margin."""
    top = noise.largest(t)
    cols = ["workload", "measure", "gpus", "spread_pct", "spread_points", "median", "min", "max", "kind",
            "experiments", "runs"]  # fmt: skip
    return top[cols] if len(top) else pd.DataFrame(columns=cols)


def notes(runs: pd.DataFrame, t: pd.DataFrame) -> list[str]:
    sets = t.drop_duplicates("run") if len(t) else t
    kinds = sets["kind"].value_counts().to_dict() if len(sets) else {}
    said = "; ".join(f"{n} {k}" for k, n in kinds.items()) or "none"
    return [
        f"Sets of runs that did identical work in this results folder: {said}. Spread = (max - "
        "min) / median of the quantity over a set (per-epoch quantities: the epoch where the "
        "runs differ most). A verdict's margin is the largest spread of its quantity at its "
        "rank counts; a quantity without such a set decides only where its cells have repeats. "
        "The noise cells (N1/N2) run their three seeds at the start, the middle and the end of "
        "the sweep, and seed 0 once more at the end beside a busy core (on a CPU, processes "
        "spinning until the machine has one runnable process more than its cores, counting work "
        "already running, and at least one; on a GPU node one), so that every margin covers a run "
        "beside that load."
    ]


ARTIFACT = Artifact(table=table, compact=compact, keys=KEYS, notes=notes, title=TITLE)
