"""L2 (Table 5, C and J): LoRA on alpaca, s/it and total (epoch) time with pin_memory off and on.

The paper's Table 5 is shown beside (reference/paper/table5_pin_memory_llm.csv). Its relative
improvement is the time saved by pinning, in % of the unpinned time; ours is computed the same way.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from analysis import common as c

TARGET, EXP = "table-llm-pinmem", "L2"
LIMIT_PCT = 4.0


def build_table(df: pd.DataFrame) -> pd.DataFrame:
    df = df.copy()
    for col in ("s_per_it", "epoch_time_s", "epoch_time_projected", "pin_memory_effective"):
        if col not in df:
            df[col] = None
    off = {
        int(r["gpus"]): r["epoch_time_s"]
        for _, r in df.iterrows()
        if not r["pin_memory"] and r["status"] == "ok"
    }
    df["relative_improvement_pct"] = [
        100.0 * (off[int(r["gpus"])] - r["epoch_time_s"]) / off[int(r["gpus"])]
        if r["pin_memory"] and r["status"] == "ok" and off.get(int(r["gpus"]))
        else None
        for _, r in df.iterrows()
    ]
    df = df.sort_values(["gpus", "pin_memory"])
    # the paper's total time is the epoch's; the runs' own total_time_s covers only their steps
    return df.drop(columns=["total_time_s"], errors="ignore").rename(
        columns={"s_per_it": "iteration_time_s_per_it", "epoch_time_s": "total_time_s"}
    )[
        [
            "gpus",
            "pin_memory",
            "iteration_time_s_per_it",
            "total_time_s",
            "epoch_time_projected",
            "relative_improvement_pct",
            "pin_memory_effective",
            "status",
            "run",
        ]
    ]


def claims(t: pd.DataFrame, gpu: bool) -> list[dict[str, str]]:
    ok = c.ok_runs(t)
    rel = ok[ok["pin_memory"].astype(bool)].dropna(subset=["relative_improvement_pct"])
    ev = ", ".join(
        f"{int(g)} GPU: {v:+.2f} %"
        for g, v in zip(rel["gpus"], rel["relative_improvement_pct"], strict=True)
    )
    ev = f"time saved by pinning: {ev or 'no pairs'} (paper: +0.04, +1.57, -0.03, +3.50 % on 1-4 GPUs)"
    if gpu:
        verdict = c.judged(
            bool((rel["relative_improvement_pct"].abs() < LIMIT_PCT).all()) if len(rel) else None
        )
    else:
        verdict = c.UNMEASURED
        ev += (
            ". Not measured: without a GPU there is no host-to-device copy for pinned memory to "
            "speed up, so these differences are run-to-run noise, not an effect of pinning."
        )
    return [
        c.claim(
            "L2a",
            "pin_memory changes LLM tuning time by less than 4 %",
            f"|time saved by pinning| < {LIMIT_PCT:.0f} % of the unpinned total time at every "
            "GPU count",
            verdict,
            ev,
        )
    ]


def build(profile: str) -> Path:
    df, skipped = c.experiment_runs(EXP, profile)
    table = build_table(df)
    gpu = c.on_gpu(df)
    notes = c.llm_cpu_notes(df)
    if not gpu:
        notes.append(
            "CPU run: pin_memory=True only warns without an accelerator; pinned and unpinned runs "
            "do the same work (pin_memory_effective is the loader's own flag)."
        )
    if table["epoch_time_projected"].fillna(False).astype(bool).any():
        notes.append(
            "Total times marked projected are s/it x steps per epoch (the runs stop after "
            f"{int(df['steps'].dropna().max())} steps); the paper's are whole epochs (h:mm:ss)."
        )
    return c.write_artifact(
        TARGET,
        profile,
        table,
        experiments=[EXP],
        claims=claims(table, gpu),
        notes=notes,
        paper_csv="table5_pin_memory_llm.csv",
        skipped=skipped,
        figure=False,
    )


if __name__ == "__main__":
    c.main_for(build, __doc__)
