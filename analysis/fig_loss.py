"""V7 (J Fig.5): training loss and test accuracy per epoch by precision and pin_memory."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from analysis import common as c

TARGET, EXP = "fig-loss", "V7"


def build_table(df: pd.DataFrame, profile: str) -> pd.DataFrame:
    rows = []
    for _, r in c.ok_runs(df).iterrows():
        for e in c.epochs_of(r["run"], profile):
            rows.append(
                {
                    "precision": r["precision"],
                    "pin_memory": r["pin_memory"],
                    "gpus": r["gpus"],
                    "epoch": e["epoch"],
                    "train_loss": e["train_loss"],
                    "test_accuracy_pct": e["test_accuracy_pct"],
                    "run": r["run"],
                }
            )
    cols = ["precision", "pin_memory", "gpus", "epoch", "train_loss", "test_accuracy_pct", "run"]
    return pd.DataFrame(rows, columns=cols).sort_values(["precision", "pin_memory", "epoch"])


def claims(t: pd.DataFrame, comparable: tuple[bool, str] = (True, "")) -> list[dict[str, str]]:
    if t.empty:
        return [c.claim(i, x, y, c.UNMEASURED, "no finished runs") for i, x, y in CLAIMS]
    last = t[t["epoch"] == t["epoch"].max()].set_index(["precision", "pin_memory"])
    loss = last["train_loss"]

    def final(p: str) -> float | None:
        return float(loss[(p, False)]) if (p, False) in loss.index else None

    f64, f32, f16 = final("fp64"), final("fp32"), final("fp16")
    ev = f"final loss (pin off) FP64/FP32/FP16: {f64}/{f32}/{f16}".replace("None", "-")
    if None not in (f64, f32, f16):
        ev = f"final loss (pin off) FP64 {f64:.3f}, FP32 {f32:.3f}, FP16 {f16:.3f}"
    a = c.judged(f64 > f32 and f64 > f16) if None not in (f64, f32, f16) else c.UNMEASURED
    b = c.judged(abs(f16 - f32) <= 0.1 * f32) if None not in (f32, f16) else c.UNMEASURED
    diffs = []
    for p in ("fp64", "fp32", "fp16"):
        on = t[(t["precision"] == p) & t["pin_memory"]].set_index("epoch")["train_loss"]
        off = t[(t["precision"] == p) & ~t["pin_memory"]].set_index("epoch")["train_loss"]
        common = on.index.intersection(off.index)
        if len(common):
            diffs.append(float(((on[common] - off[common]).abs() / off[common]).max()))
    cc = c.judged(max(diffs) <= 0.05) if diffs else c.UNMEASURED
    ev_c = (
        f"largest relative loss difference pinned vs unpinned: {max(diffs):.1%}"
        if diffs
        else "no pairs"
    )
    upto = min(3, int(t["epoch"].max()))
    acc = t[t["epoch"] == upto]["test_accuracy_pct"]
    d = c.judged(bool((acc >= 97).all())) if comparable[0] else c.UNMEASURED
    ev_d = f"test accuracy after epoch {upto}: {acc.min():.1f}-{acc.max():.1f} %"
    if not comparable[0]:
        ev_d += f" ({comparable[1]})"
    verdicts = [(a, ev), (b, ev), (cc, ev_c), (d, ev_d)]
    return [c.claim(i, x, y, v, e) for (i, x, y), (v, e) in zip(CLAIMS, verdicts, strict=True)]


CLAIMS = [
    (
        "V7a",
        "FP64 converges more slowly than FP32 and FP16",
        "FP64's final training loss is above both FP32's and FP16's (pin_memory off)",
    ),
    (
        "V7b",
        "FP16 reaches a loss comparable to FP32",
        "FP16's final training loss within 10 % of FP32's",
    ),
    (
        "V7c",
        "pin_memory does not change the loss curve",
        "per-epoch loss pinned vs unpinned differs by at most 5 % for every precision",
    ),
    (
        "V7d",
        "2-3 epochs already give good accuracy",
        "test accuracy after epoch 3 (or the last, if fewer) at least 97 % in every run",
    ),
]


def build(profile: str) -> Path:
    df, skipped = c.experiment_runs(EXP, profile)
    table = build_table(df, profile)
    return c.write_artifact(
        TARGET,
        profile,
        table,
        experiments=[EXP],
        claims=claims(table, c.accuracy_comparable(df)),
        notes=[],
        paper_csv=None,
        skipped=skipped,
        figure=True,
    )


if __name__ == "__main__":
    c.main_for(build, __doc__)
