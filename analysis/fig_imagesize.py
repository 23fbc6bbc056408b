"""V2 (C Fig.2, J Fig.2): execution time and efficiency against image size and GPU count."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from analysis import common as c

TARGET, EXP = "fig-imagesize", "V2"


def build_table(df: pd.DataFrame) -> pd.DataFrame:
    df = c.speedups(df, by=["image_size"]).sort_values(["image_size", "gpus"])
    return df[
        ["image_size", "gpus", "total_time_s", "speedup_vs_1gpu", "efficiency_pct", "status", "run"]
    ]


def claims(t: pd.DataFrame) -> list[dict[str, str]]:
    ok = c.ok_runs(t).dropna(subset=["efficiency_pct"])
    top = int(ok["gpus"].max()) if len(ok) else 1
    eff = ok[ok["gpus"] == top].set_index("image_size")["efficiency_pct"].sort_index()
    ev = ", ".join(f"{s} px: {e:.0f} %" for s, e in eff.items())
    ev = f"efficiency at {top} GPU(s): {ev or 'no runs'}"
    if top < 2 or len(eff) < 2:
        a = c.UNMEASURED
    else:
        a = c.judged(bool(eff.iloc[-1] > eff.iloc[0]))
    big = eff[eff.index >= 300]
    b = c.judged(bool((big >= 75).all())) if top >= 4 and len(big) else c.UNMEASURED
    b_ev = ev if b != c.UNMEASURED else ev + " (needs 4 GPUs and images of 300 px or more)"
    return [
        c.claim(
            "V2a",
            "Extra GPUs help only above some image size",
            "efficiency at the largest GPU count is higher for the largest image than the smallest",
            a,
            ev,
        ),
        c.claim(
            "V2b",
            "4 GPUs are used effectively from 300x300 up",
            "efficiency with 4 GPUs at least 75 % for every image size of 300 px or more",
            b,
            b_ev,
        ),
    ]


def build(profile: str) -> Path:
    df, skipped = c.experiment_runs(EXP, profile)
    table = build_table(df)
    return c.write_artifact(
        TARGET,
        profile,
        table,
        experiments=[EXP],
        claims=claims(table),
        notes=[],
        paper_csv=None,
        skipped=skipped,
        figure=True,
    )


if __name__ == "__main__":
    c.main_for(build, __doc__)
