"""V7 (J Fig.5): training loss and test accuracy per epoch by precision and pin_memory."""

from __future__ import annotations

import pandas as pd

from analysis import common as c

FIGURE = True
KEYS = ["precision", "pin_memory", "epoch"]
VALUES = ["train_loss", "test_accuracy_pct"]
ORDER = ["fp64", "fp32", "fp16"]


def table(runs: pd.DataFrame, profile: str) -> pd.DataFrame:
    rows = []
    for _, r in c.ok_runs(runs).iterrows():
        for e in c.epochs_of(r["run"], profile):
            rows.append(
                {
                    "precision": r["precision"],
                    "pin_memory": r["pin_memory"],
                    "gpus": r["gpus"],
                    "epoch": e["epoch"],
                    "train_loss": e["train_loss"],
                    "test_accuracy_pct": e["test_accuracy_pct"],
                    "status": "ok",
                    "run": r["run"],
                }
            )
    cols = [*KEYS[:2], "gpus", "epoch", *VALUES, "status", "run"]
    return pd.DataFrame(rows, columns=cols).sort_values(["precision", "pin_memory", "epoch"])


def compact(t: pd.DataFrame) -> pd.DataFrame:
    return c.compact(t, KEYS, VALUES, order={"precision": ORDER})


def gates(runs: pd.DataFrame, t: pd.DataFrame) -> dict[str, str]:
    return {"learned": c.not_learned(runs), "paper_data": c.not_paper_data(runs)}
