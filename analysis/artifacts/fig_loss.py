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


def identical(t: pd.DataFrame) -> set[str]:
    """The precisions whose pin_memory off and on runs agree in every epoch, loss and accuracy
    (on a CPU, where pin_memory is a no-op, they are bit-identical): the figure draws such a
    pair once, and the title says so."""
    out = set()
    ok = t[t["status"] == "ok"] if len(t) else t
    for p, g in ok.groupby(ok["precision"].astype(str)):
        pin = g["pin_memory"].astype(str) == "True"
        off, on = (g[m].groupby("epoch")[VALUES].median() for m in (~pin, pin))
        if len(off) and len(on) and off.equals(on):
            out.add(p)
    return out


def title(runs: pd.DataFrame, t: pd.DataFrame) -> str:
    precisions = set(t.loc[t["status"] == "ok", "precision"].astype(str)) if len(t) else set()
    if precisions and identical(t) == precisions:
        why = "" if c.on_gpu(runs) else ", a no-op without a GPU"
        return f"Training loss by precision (pin_memory off and on identical{why})"
    return "Training loss by precision and pin_memory"


def gates(runs: pd.DataFrame, t: pd.DataFrame) -> dict[str, str]:
    return {"learned": c.not_learned(runs), "paper_data": c.not_paper_data(runs)}
