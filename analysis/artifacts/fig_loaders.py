"""V8 (J Fig.6): Scenario B total time, DataLoader against DALI, by GPU count (no paper
numbers: no paper() table, no self-check)."""

from __future__ import annotations

import pandas as pd

from analysis import common as c
from analysis import draw
from analysis import steady as st
from analysis.driver import Artifact
from run.vision.spec import LOADER_LABELS

KEYS = ["loader"]


def table(runs: pd.DataFrame, scale: str) -> pd.DataFrame:
    df = runs.assign(loader_label=runs["loader"].map(LOADER_LABELS))
    df = st.with_steady(df, scale, "total_time_s", "total_time_s")
    df = df.sort_values(["loader", "gpus"], ascending=[False, True])
    return df[["loader", "loader_label", "gpus", "total_time_s", "images_per_s",
               *st.steady_cols(df, "total_time_s"), "status", "run"]]  # fmt: skip


def compact(t: pd.DataFrame) -> pd.DataFrame:
    """Loader as rows, total time per GPU count as columns (the figure's bars)."""
    return c.pivot(t, KEYS, "gpus", {"total_time_s": lambda g: f"{c.gpus_label(g)} [s]"})


notes = c.cpu_note(
    "CPU run: DALI decodes on the CPU (no `mixed` decoder without a GPU), so this shows the "
    "pipeline working, not the paper's GPU behaviour."
)


figure = draw.time_bars_figure("loader_label", "DataLoader against DALI (Scenario B; {runs})")


ARTIFACT = Artifact(table=table, compact=compact, keys=KEYS, notes=notes, figure=figure)
