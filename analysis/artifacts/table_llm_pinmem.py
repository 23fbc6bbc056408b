"""L2 (Table 5, C and J): LoRA on alpaca, s/it and total (epoch) time with pin_memory off and on.

The paper's Table 5 (reference/paper/table5_pin_memory_llm.csv) is `paper()`, in this table's
shape. Its relative improvement is the time saved by pinning, in % of the unpinned time; ours is
computed the same way, each pinned run against the unpinned run of the same GPU count (and seed,
when repeats ran; else the median of the unpinned repeats).
"""

from __future__ import annotations

import pandas as pd

from analysis import common as c
from analysis.driver import Artifact

PAPER_CSV = "table5_pin_memory_llm.csv"
KEYS = ["gpus", "pin_memory"]
VALUES = ["iteration_time_s_per_it", "total_time_s", "relative_improvement_pct"]
COLUMNS = ["gpus", "pin_memory", "iteration_time_s_per_it", "total_time_s", "epoch_time_projected",
           "relative_improvement_pct", "pin_memory_effective", "status", "run"]  # fmt: skip
# gates(): why L2a cannot be judged without a GPU (claims.yaml `gates: [gpu]`)
NO_PINNING = (
    "needs a GPU: without one there is no host-to-device copy for pinned memory to speed up, so "
    "the differences between pinned and unpinned runs are run-to-run noise, not an effect of "
    "pinning"
)


def table(runs: pd.DataFrame, scale: str) -> pd.DataFrame:
    df = runs.copy()
    if df.empty:
        return pd.DataFrame(columns=COLUMNS)
    for col in ("s_per_it", "epoch_time_s", "epoch_time_projected", "pin_memory_effective"):
        if col not in df:
            df[col] = None
    for col in ("s_per_it", "epoch_time_s"):
        df[col] = pd.to_numeric(df[col], errors="coerce")
    df["relative_improvement_pct"] = _improvement(df)
    df = df.sort_values(["gpus", "pin_memory"], kind="mergesort")
    # the paper's total time is the epoch's; the runs' own total_time_s covers only their steps
    df = df.drop(columns=["total_time_s"], errors="ignore").rename(
        columns={"s_per_it": "iteration_time_s_per_it", "epoch_time_s": "total_time_s"}
    )
    return df[COLUMNS].reset_index(drop=True)


def _improvement(df: pd.DataFrame) -> list[float | None]:
    ok = df[(df["status"] == "ok") & df["epoch_time_s"].notna()]
    off = ok[~ok["pin_memory"].astype(bool)]
    seeded = "seed" in df
    by_seed = (
        {(r["gpus"], r["seed"]): float(r["epoch_time_s"]) for _, r in off.iterrows()}
        if seeded
        else {}
    )
    median = off.groupby("gpus")["epoch_time_s"].median().to_dict()
    out: list[float | None] = []
    for _, r in df.iterrows():
        base = by_seed.get((r["gpus"], r["seed"])) if seeded else None
        base = base if base is not None else median.get(r["gpus"])
        pinned = bool(r["pin_memory"]) and r["status"] == "ok" and pd.notna(r["epoch_time_s"])
        out.append(100.0 * (base - r["epoch_time_s"]) / base if pinned and base else None)
    return out


def hms_seconds(text: str) -> float:
    """'5:31:52' (h:mm:ss, as Table 5 prints total times) -> 19912.0 seconds."""
    h, m, s = (float(x) for x in str(text).split(":"))
    return 3600 * h + 60 * m + s


def paper() -> pd.DataFrame:
    """Table 5 (pin_memory_effective empty: the paper states nothing of it)."""
    p = c.paper_table(PAPER_CSV)
    return pd.DataFrame(
        {
            "gpus": p["gpus"].astype(int),
            "pin_memory": p["pin_memory"].astype(bool),
            "iteration_time_s_per_it": p["iteration_time_s_per_it"].astype(float),
            "total_time_s": p["total_time"].map(hms_seconds),
            "epoch_time_projected": False,
            "relative_improvement_pct": p["relative_improvement_pct"].astype(float),
            "pin_memory_effective": None,
            "status": "ok",
            "run": "paper",
        },
        columns=COLUMNS,
    )


def compact(t: pd.DataFrame) -> pd.DataFrame:
    return c.compact(t, KEYS, VALUES)


def notes(runs: pd.DataFrame, t: pd.DataFrame) -> list[str]:
    out = c.llm_cpu_notes(runs)
    if not c.on_gpu(runs) and len(runs):
        out.append(
            "CPU run: pin_memory=True only warns without an accelerator; pinned and unpinned runs "
            "do the same work (pin_memory_effective is the loader's own flag)."
        )
    if len(t) and t["epoch_time_projected"].fillna(False).astype(bool).any():
        steps = runs["steps"].dropna() if "steps" in runs else pd.Series(dtype=float)
        stop = f" (the runs stop after {int(steps.max())} steps)" if len(steps) else ""
        out.append(
            f"Total times marked projected are s/it x steps per epoch{stop}; the paper's are "
            "whole epochs (h:mm:ss)."
        )
    return out


gates = c.gpu_gate(NO_PINNING)


ARTIFACT = Artifact(
    table=table,
    compact=compact,
    keys=KEYS,
    paper=paper,
    paper_csv=PAPER_CSV,
    notes=notes,
    gates=gates,
)
