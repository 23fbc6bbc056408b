"""V3 (Table 2): total time, accuracy and efficiency by precision and GPU count."""

from __future__ import annotations

import pandas as pd

from analysis import common as c
from analysis import steady as st
from analysis.driver import Artifact
from run.vision.spec import PAPER_PRECISIONS

PAPER_CSV = "table2_precision.csv"
KEYS = ["gpus", "precision"]
VALUES = ["total_time_s", "inference_accuracy_pct", "efficiency_vs_1gpu_pct",
          "efficiency_vs_fp64_pct"]  # fmt: skip


def table(runs: pd.DataFrame, scale: str) -> pd.DataFrame:
    df = st.with_steady(runs, scale, "total_time_s", "total_time_s")
    df = c.speedups(df, by=["precision"])
    df = c.speedups(df, by=["precision"], time_col="total_time_s_steady", suffix="_steady")
    for s in ("", "_steady"):
        df = vs_fp64(df, f"total_time_s{s}", f"efficiency_vs_fp64_pct{s}")
        df[f"efficiency_vs_1gpu_pct{s}"] = 100.0 * pd.to_numeric(df[f"speedup_vs_1gpu{s}"])
    for end in ("lo", "hi"):
        df[f"efficiency_vs_1gpu_pct_steady_{end}"] = 100.0 * pd.to_numeric(
            df[f"speedup_vs_1gpu_steady_{end}"])  # fmt: skip
    df = df.assign(_o=df["precision"].map(PAPER_PRECISIONS.index)).sort_values(["gpus", "_o"])
    df = df.rename(columns={"final_test_accuracy_pct": "inference_accuracy_pct"})
    steady = st.steady_cols(df, "total_time_s", "efficiency_vs_1gpu_pct", "efficiency_vs_fp64_pct")
    return df[[*KEYS, "precision_effective", *VALUES, *steady, "status", "run"]]


def vs_fp64(df: pd.DataFrame, time_col: str, out: str) -> pd.DataFrame:
    """Speed relative to FP64 at the same GPU count, 100 x FP64's time / the run's; with the
    times' within-run ranges (`_lo`/`_hi`) where they have them."""
    df = df.copy()
    fp64 = {r["gpus"]: r for _, r in df.iterrows() if r["precision"] == "fp64"}
    spread = f"{time_col}_lo" in df
    vals, lo, hi = [], [], []
    for _, r in df.iterrows():
        b = fp64.get(r["gpus"])
        good = (r["precision"] != "fp64" and r["status"] == "ok" and b is not None
                and c._num(b[time_col]) and c._num(r[time_col]))  # fmt: skip
        vals.append(100.0 * b[time_col] / r[time_col] if good else None)
        ends = good and spread and all(c._num(x) for x in (b[f"{time_col}_lo"], b[f"{time_col}_hi"],
                                                           r[f"{time_col}_lo"], r[f"{time_col}_hi"]))  # fmt: skip
        lo.append(100.0 * b[f"{time_col}_lo"] / r[f"{time_col}_hi"] if ends else None)
        hi.append(100.0 * b[f"{time_col}_hi"] / r[f"{time_col}_lo"] if ends else None)
    df[out] = vals
    if spread:
        df[f"{out}_lo"], df[f"{out}_hi"] = lo, hi
    return df


def paper() -> pd.DataFrame:
    p = c.paper_table(PAPER_CSV)
    return p.assign(precision=p["precision"].str.lower(), status="ok", run="paper")


def compact(t: pd.DataFrame) -> pd.DataFrame:
    return c.compact(t, KEYS, VALUES, order={"precision": PAPER_PRECISIONS})


notes = c.cpu_note(
    "CPU run: FP16 is requested but runs as bf16 autocast (CPU has no useful fp16 "
    "autocast); on a CPU without bf16 instructions this is slower than FP32."
)


ARTIFACT = Artifact(
    table=table,
    compact=compact,
    keys=KEYS,
    paper=paper,
    paper_csv=PAPER_CSV,
    notes=notes,
    gates=c.learning_gates,
)
