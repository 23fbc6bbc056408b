"""N1/N2 (ours): run-to-run noise of one vision and one LLM cell, each run three times.

Not a figure of the papers: the floor every timing verdict is judged against (analysis/noise.py).
A margin between two single runs smaller than the largest spread here decides nothing.
"""

from __future__ import annotations

import math

import pandas as pd

from analysis import noise

TITLE = "Run-to-run noise (the verdicts' noise floor)"
FIGURE = False
KEYS = ["workload", "gpus"]


def table(runs: pd.DataFrame, profile: str) -> pd.DataFrame:
    return noise.table(runs)


def compact(t: pd.DataFrame) -> pd.DataFrame:
    return t.drop(columns=["run"])


def notes(runs: pd.DataFrame, t: pd.DataFrame) -> list[str]:
    m = noise.margins(t)
    said = ", ".join(
        f"{w} {'not measured' if math.isinf(v) else f'{100 * v:.1f} %'}" for w, v in m.items()
    )
    return [
        "Identical work run three times (seeds 0-2): spread = (max - min) / median of the timed "
        f"quantity. The margin each workload's timing verdicts must clear: {said}; a difference "
        "inside it is called inconclusive."
    ]
