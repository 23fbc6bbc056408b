"""V7 (J Fig.5): training loss and test accuracy per epoch by precision and pin_memory."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from analysis import common as c
from analysis import draw
from analysis.driver import Artifact
from run.vision.spec import PAPER_PRECISIONS

KEYS = ["precision", "pin_memory", "epoch"]
VALUES = ["train_loss", "test_accuracy_pct"]


def table(runs: pd.DataFrame, scale: str) -> pd.DataFrame:
    rows = []
    for _, r in c.ok_runs(runs).iterrows():
        for e in c.epochs_of(r["run"], scale):
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
    return c.compact(t, KEYS, VALUES, order={"precision": PAPER_PRECISIONS})


def identical(t: pd.DataFrame) -> set[str]:
    """The precisions whose pin_memory off and on runs agree in every epoch (bit-identical on a
    CPU, where pin_memory is a no-op): drawn once, and the title says so."""
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


SAME = "pin off = on"  # the label's suffix of a pair drawn once


def _pin(pin: object) -> str:
    return "on" if str(pin) == "True" else "off"


def _labels(df: pd.DataFrame) -> pd.Series:
    same = identical(df)
    return pd.Series([f"{str(p).upper()} ({SAME})" if str(p) in same
                      else f"{str(p).upper()} pin={_pin(pin)}"
                      for p, pin in zip(df["precision"], df["pin_memory"], strict=True)],
                     index=df.index)  # fmt: skip


def _series(df: pd.DataFrame) -> list[str]:
    """FP64 first (the paper's baseline), pin off before on."""
    keys = df[["precision", "pin_memory"]].astype(str)
    rank = keys["precision"].map(
        lambda p: PAPER_PRECISIONS.index(p) if p in PAPER_PRECISIONS else len(PAPER_PRECISIONS)
    )
    order = keys.assign(r=rank).sort_values(["r", "precision", "pin_memory"]).index
    return list(dict.fromkeys(_labels(df).loc[order]))


def figure(df: pd.DataFrame, meta: dict) -> plt.Figure:
    df = df.assign(series=_labels(df))
    names = _series(df)
    pinned = [s for s in names if s.endswith("pin=on")]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.6))
    for ax, col in zip((ax1, ax2), VALUES, strict=True):
        # a pair drawn once: both runs hold the same values, their median is either
        wide = df.pivot_table(index="epoch", columns="series", values=col, aggfunc="median")
        draw.lines_or_bars(ax, wide.reindex(columns=names), "epoch", dashed=pinned)
    ax1.set(ylabel="training loss (cross-entropy)")
    ax2.set(ylabel="test accuracy [%]")
    draw.legend(ax1, fig=fig)
    same = [s for s in names if s.endswith(f"({SAME})")]
    if same:
        no_gpu = bool((meta.get("gates") or {}).get("gpu"))
        why = "pin_memory is a no-op without a GPU, so " if no_gpu else ""
        fig.text(0.01, -0.02, f"{why}pin_memory off and on gave identical losses and accuracies "
                 f"for {', '.join(s.split(' ')[0] for s in same)}: each such pair is drawn once, "
                 f"not as a comparison.", fontsize=7, color="darkred", va="top")  # fmt: skip
        what = "Training loss by precision" + (
            " (pin_memory off and on identical)" if len(same) == len(names) else
            " and pin_memory")  # fmt: skip
    else:
        what = "Training loss by precision and pin_memory"
    fig.suptitle(f"{what}\n{draw.subtitle(meta)}", fontsize=10)
    fig.tight_layout()
    return fig


ARTIFACT = Artifact(
    table=table, compact=compact, keys=KEYS, gates=c.learning_gates, title=title, figure=figure
)
