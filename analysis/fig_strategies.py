"""V1 (C Fig.1): total time and speed-up vs 1 GPU for DDP, DDP-RR and DDP-DS."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from analysis import common as c

TARGET, EXP = "fig-strategies", "V1"
STRATEGIES = ["ddp", "ddp_rr", "ddp_ds"]


def build_table(df: pd.DataFrame) -> pd.DataFrame:
    # The 1-GPU cell is one shared run; it stands as the 1-GPU point of every strategy.
    ones = df[df["gpus"] == 1]
    rows = [df[df["gpus"] > 1]]
    for s in STRATEGIES:
        rows.append(ones.assign(strategy=s))
    df = pd.concat(rows, ignore_index=True)
    df = c.speedups(df, by=["strategy"])
    df["strategy_order"] = df["strategy"].map(STRATEGIES.index)
    df = df.sort_values(["strategy_order", "gpus"])
    return df[
        ["strategy", "gpus", "total_time_s", "speedup_vs_1gpu", "efficiency_pct", "status", "run"]
    ]


def useful(speedup: float, gpus: int) -> bool:
    """At least half of every added GPU turned into speed."""
    return speedup >= 1 + 0.5 * (gpus - 1)


def claims(t: pd.DataFrame) -> list[dict[str, str]]:
    ok = c.ok_runs(t)
    top = int(ok["gpus"].max()) if len(ok) else 1
    at_top = {r["strategy"]: r["speedup_vs_1gpu"] for _, r in ok[ok["gpus"] == top].iterrows()}
    ev = ", ".join(f"{s}: {at_top[s]:.2f}x" for s in STRATEGIES if s in at_top)
    ev = f"speed-up at {top} GPU(s): {ev or 'no runs'}"
    if top < 2 or "ddp_ds" not in at_top:
        return [
            c.claim(cid, text, crit, c.UNMEASURED, ev + " (needs at least 2 GPUs)")
            for cid, text, crit in CLAIMS
        ]
    ds = at_top["ddp_ds"]
    others = [at_top[s] for s in ("ddp", "ddp_rr") if s in at_top]
    return [
        c.claim(*CLAIMS[0], c.judged(useful(ds, top)), ev),
        c.claim(
            *CLAIMS[1],
            c.judged(bool(others) and all(o < ds and not useful(o, top) for o in others)),
            ev,
        ),
    ]


CLAIMS = [
    (
        "V1a",
        "DDP-DS scales with the number of GPUs",
        "DDP-DS speed-up at the largest GPU count n is at least 1 + 0.5 (n - 1)",
    ),
    (
        "V1b",
        "DDP-RR and DDP show limited or no gain",
        "their speed-up at the largest GPU count is below DDP-DS's and below 1 + 0.5 (n - 1)",
    ),
]


def build(profile: str) -> Path:
    df, skipped = c.experiment_runs(EXP, profile)
    table = build_table(df)
    notes = []
    if not c.on_gpu(df):
        notes.append(
            "CPU run: gloo ranks share the machine's cores, and the 1-rank baseline already uses "
            "all of them through intra-op threads, so extra ranks cannot add compute here."
        )
    return c.write_artifact(
        TARGET,
        profile,
        table,
        experiments=[EXP],
        claims=claims(table),
        notes=notes,
        paper_csv=None,
        skipped=skipped,
        figure=True,
    )


if __name__ == "__main__":
    c.main_for(build, __doc__)
