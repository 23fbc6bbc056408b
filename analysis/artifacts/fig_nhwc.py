"""V10 (J Fig.9): Scenario B, DataLoader with NCHW and with NHWC (channels_last) against DALI.

The DataLoader NCHW and DALI NCHW cells are the V8 runs (identical specs are run once). The
paper printed no numbers for this figure: there is no paper() table and no self-check.
"""

from __future__ import annotations

import pandas as pd

from analysis import common as c
from analysis import draw
from analysis import steady as st
from analysis.driver import Artifact
from run.vision.spec import LOADER_LABELS

KEYS = ["setup"]


def table(runs: pd.DataFrame, scale: str) -> pd.DataFrame:
    layout = runs["channels_last"].map({True: "NHWC", False: "NCHW"})
    df = runs.assign(setup=runs["loader"].map(LOADER_LABELS) + " " + layout)
    df = st.with_steady(df, scale, "total_time_s", "total_time_s")
    df = df.sort_values(["loader", "channels_last", "gpus"], ascending=[False, True, True])
    return df[["setup", "loader", "channels_last", "gpus", "total_time_s", "images_per_s",
               *st.steady_cols(df, "total_time_s"), "status", "run"]]  # fmt: skip


def compact(t: pd.DataFrame) -> pd.DataFrame:
    order = ["DataLoader NCHW", "DataLoader NHWC", "DALI NCHW", "DALI NHWC"]
    name = {"total_time_s": lambda g: f"{c.gpus_label(g)} [s]"}
    return c.pivot(t, KEYS, "gpus", name, rows={"setup": order})


figure = draw.time_bars_figure(
    "setup", "NHWC (channels_last) DataLoader against DALI ({runs})", width=6.5
)


ARTIFACT = Artifact(table=table, compact=compact, keys=KEYS, figure=figure)
