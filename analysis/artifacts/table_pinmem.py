"""V4 (Table 3): total time, accuracy and efficiency with pin_memory off and on."""

from __future__ import annotations

import pandas as pd

from analysis import common as c
from analysis.driver import Artifact

PAPER_CSV = "table3_pin_memory_vision.csv"
KEYS = ["gpus", "pin_memory"]
VALUES = ["total_time_s", "inference_accuracy_pct", "efficiency_vs_1gpu_pct",
          "efficiency_vs_unpinned_pct"]  # fmt: skip
NO_PIN_ON_CPU = (
    "needs a GPU: without one there is no host-to-device copy to pin for (pin_memory=True only "
    "warns), so pinned and unpinned runs do the same work"
)


def table(runs: pd.DataFrame, scale: str) -> pd.DataFrame:
    df = c.speedups(runs, by=["pin_memory"])
    off = {r["gpus"]: r["total_time_s"] for _, r in df.iterrows() if not r["pin_memory"]}
    df["efficiency_vs_unpinned_pct"] = [
        100.0 * off[r["gpus"]] / r["total_time_s"]
        if r["pin_memory"] and r["status"] == "ok" and off.get(r["gpus"])
        else None
        for _, r in df.iterrows()
    ]
    df["efficiency_vs_1gpu_pct"] = 100.0 * df["speedup_vs_1gpu"]
    df = df.sort_values(["gpus", "pin_memory"])
    df = df.rename(columns={"final_test_accuracy_pct": "inference_accuracy_pct"})
    return df[[*KEYS, *VALUES, "status", "run"]]


def paper() -> pd.DataFrame:
    p = c.paper_table(PAPER_CSV)
    pin = p["pin_memory"].astype(str).str.lower() == "true"
    return p.assign(pin_memory=pin, status="ok", run="paper")


def compact(t: pd.DataFrame) -> pd.DataFrame:
    """Table 3's layout: GPUs x pin_memory as rows, time, accuracy and both efficiencies."""
    return c.compact(t, KEYS, VALUES)


notes = c.cpu_note(
    "CPU run: pin_memory=True only warns without an accelerator, so pinned and unpinned runs "
    "do the same work; their difference here is run-to-run noise."
)
gates = c.gpu_gate(NO_PIN_ON_CPU)


ARTIFACT = Artifact(
    table=table,
    compact=compact,
    keys=KEYS,
    paper=paper,
    paper_csv=PAPER_CSV,
    notes=notes,
    gates=gates,
)
