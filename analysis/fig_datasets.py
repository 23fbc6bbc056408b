"""L1 (C Fig.4, J Fig.10): LoRA mean iteration time (s/it) by dataset and GPU count.

The runs stop after `max_steps` steps (a whole epoch of C4-200M is 185M rows), so the epoch time
beside s/it is s/it x the epoch's step count (`epoch_time_projected` says when it is projected).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from analysis import common as c

TARGET, EXP = "fig-datasets", "L1"
DATASETS = ["alpaca", "grammar", "samsum", "slimorca"]
SLIGHT = 1.5  # "rises slightly": at most +50 % from 1 GPU to the next count
FLAT = 0.10  # "little further change": within +-10 % of the 2-GPU value


def build_table(df: pd.DataFrame) -> pd.DataFrame:
    df = df.copy()
    df["dataset_order"] = df["dataset"].map(DATASETS.index)
    df = df.sort_values(["dataset_order", "gpus"])
    cols = [
        "dataset",
        "gpus",
        "s_per_it",
        "epoch_time_s",
        "epoch_time_projected",
        "steps",
        "steps_per_epoch",
        "tokens_per_s",
        "status",
        "run",
    ]
    for col in cols:
        if col not in df:
            df[col] = None
    return df[cols]


def _sit(ok: pd.DataFrame) -> dict[tuple[str, int], float]:
    return {(r["dataset"], int(r["gpus"])): float(r["s_per_it"]) for _, r in ok.iterrows()}


def claims(t: pd.DataFrame) -> list[dict[str, str]]:
    ok = c.ok_runs(t).dropna(subset=["s_per_it"])
    sit = _sit(ok)
    gpus = sorted({g for _, g in sit})
    out = []

    # L1a: 1 GPU -> the next GPU count
    if len(gpus) >= 2:
        g2 = gpus[1]
        ratios = {
            d: sit[(d, g2)] / sit[(d, 1)] for d in DATASETS if (d, 1) in sit and (d, g2) in sit
        }
        ev = ", ".join(f"{d} {r:.2f}x" for d, r in ratios.items())
        ev = f"s/it at {g2} GPUs / s/it at 1 GPU: {ev or 'no pairs'} (paper alpaca: 0.93/0.77 = 1.21x)"
        verdict = c.judged(all(1.0 <= r <= SLIGHT for r in ratios.values()) if ratios else None)
    else:
        ev, verdict = "only one GPU count was run", c.UNMEASURED
    out.append(
        c.claim(
            "L1a",
            "s/it rises slightly when GPUs are added",
            f"for every dataset, s/it at the second GPU count is 1.0-{SLIGHT:.1f}x the 1-GPU s/it",
            verdict,
            ev,
        )
    )

    # L1b: beyond 2 GPUs
    if len(gpus) >= 3 and 2 in gpus:
        devs = {
            (d, g): sit[(d, g)] / sit[(d, 2)] - 1
            for d in DATASETS
            for g in gpus
            if g > 2 and (d, g) in sit and (d, 2) in sit
        }
        ev = ", ".join(f"{d}@{g}: {100 * v:+.1f} %" for (d, g), v in devs.items())
        verdict = c.judged(all(abs(v) <= FLAT for v in devs.values()) if devs else None)
    else:
        ev = f"needs GPU counts above 2 (ran: {', '.join(map(str, gpus)) or 'none'})"
        verdict = c.UNMEASURED
    out.append(
        c.claim(
            "L1b",
            "Beyond 2 GPUs there is little further change in s/it",
            f"for every dataset and GPU count above 2, s/it within {100 * FLAT:.0f} % of 2 GPUs",
            verdict,
            ev,
        )
    )

    # L1c: short (grammar, samsum) vs long (alpaca, slimorca)
    parts, checks = [], []
    for g in gpus:
        short = [sit[(d, g)] for d in ("grammar", "samsum") if (d, g) in sit]
        long = [sit[(d, g)] for d in ("alpaca", "slimorca") if (d, g) in sit]
        if len(short) == 2 and len(long) == 2:
            checks.append(max(short) < min(long))
            parts.append(
                f"{g} GPU: grammar {sit[('grammar', g)]:.3f}, samsum {sit[('samsum', g)]:.3f}, "
                f"alpaca {sit[('alpaca', g)]:.3f}, slimorca {sit[('slimorca', g)]:.3f} s/it"
            )
    out.append(
        c.claim(
            "L1c",
            "grammar and samsum have shorter iterations than alpaca and slimorca",
            "at every GPU count, the slower of grammar/samsum is faster than the faster of "
            "alpaca/slimorca",
            c.judged(all(checks) if checks else None),
            "; ".join(parts) or "no GPU count with all four datasets",
        )
    )

    # L1d: total (epoch) time falls with more GPUs
    ep = {
        (r["dataset"], int(r["gpus"])): r["epoch_time_s"]
        for _, r in ok.iterrows()
        if pd.notna(r["epoch_time_s"])
    }
    if len(gpus) >= 2:
        top = gpus[-1]
        falls = {d: ep[(d, top)] / ep[(d, 1)] for d in DATASETS if (d, 1) in ep and (d, top) in ep}
        projected = bool(ok["epoch_time_projected"].fillna(False).astype(bool).any())
        ev = ", ".join(
            f"{d} {ep[(d, 1)]:.1f} s -> {ep[(d, top)]:.1f} s ({r:.2f}x)" for d, r in falls.items()
        )
        ev = f"epoch time 1 -> {top} GPUs: {ev or 'no pairs'}" + (
            " (projected: s/it x steps per epoch)" if projected else ""
        )
        verdict = c.judged(all(r < 1.0 for r in falls.values()) if falls else None)
    else:
        ev, verdict = "only one GPU count was run", c.UNMEASURED
    out.append(
        c.claim(
            "L1d",
            "Total tuning time still falls with more GPUs",
            "for every dataset, the epoch time at the largest GPU count is below the 1-GPU time",
            verdict,
            ev,
        )
    )
    return out


def build(profile: str) -> Path:
    df, skipped = c.experiment_runs(EXP, profile)
    table = build_table(df)
    notes = c.llm_cpu_notes(df)
    if "epoch_time_projected" in table and table["epoch_time_projected"].fillna(False).any():
        notes.append(
            "Epoch times marked projected are s/it x steps per epoch: the runs stop after "
            f"{int(table['steps'].dropna().max())} steps."
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
