"""L4 (C Fig.6, J Fig.12): profiler metrics by pin_memory and GPU count, LoRA on alpaca."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from analysis import common as c
from analysis.profiles import artifact as pa

TARGET, EXP = "fig-llm-api-pinmem", "L4"
NCCL = ["nccl_allgather_ring_ll", "nccl_other"]
METRICS = ["cudaLaunchKernel", "memcpy_htod", *NCCL]
NEGLIGIBLE_PCT = 1.0


def build_table(runs: pd.DataFrame, tidy: pd.DataFrame) -> pd.DataFrame:
    t = pa.table(runs, tidy, ["gpus", "pin_memory"], METRICS)  # + kernel_launch_all
    its = dict(zip(runs["run"], runs.get("s_per_it", pd.Series([None] * len(runs))), strict=True))
    t.insert(2, "s_per_it", t["run"].map(its))
    t = t.assign(k=pa.kind_order(t))
    return t.sort_values(["gpus", "pin_memory", "k"], kind="mergesort").drop(columns="k")


def claims(t: pd.DataFrame) -> list[dict[str, str]]:
    text = "pin_memory slightly increases the (already negligible) HtoD time and brings no gain"
    crit = (f"HtoD time with pin >= without at every GPU count, and HtoD < {NEGLIGIBLE_PCT:g} % "
            "of the profiled time in every run")  # fmt: skip
    if not pa.measured(t, ["memcpy_htod"]):
        return [pa.unmeasured_claim("L4a", text, crit, ["memcpy_htod"], t)]
    oks, ev = [], []
    for g in sorted(t["gpus"].unique()):
        off = pa.value(t, "memcpy_htod", gpus=g, pin_memory=False)
        on = pa.value(t, "memcpy_htod", gpus=g, pin_memory=True)
        s_off = pa.value(t, "memcpy_htod", "share_pct", gpus=g, pin_memory=False)
        s_on = pa.value(t, "memcpy_htod", "share_pct", gpus=g, pin_memory=True)
        if None in (off, on, s_off, s_on):
            continue
        oks.append(on >= off and max(s_off, s_on) < NEGLIGIBLE_PCT)
        ev.append(f"{g} GPU: {off:.3g} -> {on:.3g} s ({s_off:.2f} -> {s_on:.2f} %)")
    return [c.claim("L4a", text, crit, c.judged(all(oks) if oks else None), "; ".join(ev))]


def build(profile: str) -> Path:
    runs, skipped = c.experiment_runs(EXP, profile)
    t = build_table(runs, pa.run_metrics(runs, profile))
    return c.write_artifact(TARGET, profile, t, experiments=[EXP], claims=claims(t),
                            notes=pa.notes(t, runs), paper_csv=None, skipped=skipped, figure=True)  # fmt: skip


if __name__ == "__main__":
    c.main_for(build, __doc__)
