"""V3 (Table 2): total time, accuracy and efficiency by precision and GPU count."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from analysis import common as c

TARGET, EXP = "table-precision", "V3"
ORDER = ["fp64", "fp32", "fp16"]


def build_table(df: pd.DataFrame) -> pd.DataFrame:
    df = c.speedups(df, by=["precision"])
    fp64 = {r["gpus"]: r["total_time_s"] for _, r in df.iterrows() if r["precision"] == "fp64"}
    df["efficiency_vs_fp64_pct"] = [
        100.0 * fp64[r["gpus"]] / r["total_time_s"]
        if r["precision"] != "fp64" and r["status"] == "ok" and fp64.get(r["gpus"])
        else None
        for _, r in df.iterrows()
    ]
    df["precision_order"] = df["precision"].map(ORDER.index)
    df = df.sort_values(["gpus", "precision_order"])
    return df.rename(
        columns={"final_test_accuracy_pct": "inference_accuracy_pct", "efficiency_pct": "_eff"}
    ).assign(efficiency_vs_1gpu_pct=lambda d: 100.0 * d["speedup_vs_1gpu"])[
        [
            "gpus",
            "precision",
            "precision_effective",
            "total_time_s",
            "inference_accuracy_pct",
            "efficiency_vs_1gpu_pct",
            "efficiency_vs_fp64_pct",
            "status",
            "run",
        ]
    ]


def claims(t: pd.DataFrame, comparable: tuple[bool, str] = (True, "")) -> list[dict[str, str]]:
    ok = c.ok_runs(t)
    out = []
    for cid, prec, text, paper in (
        ("V3a", "fp32", "FP32 is 54-68 % faster than FP64", "154-168 %"),
        ("V3b", "fp16", "FP16 (mixed) is 110-152 % faster than FP64", "211-253 %"),
    ):
        vals = ok[ok["precision"] == prec]["efficiency_vs_fp64_pct"].dropna()
        verdict = c.judged(bool((vals > 100).all()) if len(vals) else None)
        ev = ", ".join(
            f"{g} GPU: {v:.1f} %"
            for g, v in zip(ok[ok["precision"] == prec]["gpus"], vals, strict=False)
        )
        out.append(
            c.claim(
                cid,
                text,
                f"{prec.upper()} runs faster than FP64 at every GPU count (speed vs FP64 > 100 %)",
                verdict,
                f"speed vs FP64: {ev or 'no runs'} (paper: {paper})",
            )
        )
    acc = ok.pivot_table(index="gpus", columns="precision", values="inference_accuracy_pct")
    comparable, why = comparable
    if {"fp64", "fp32", "fp16"} <= set(acc.columns):
        drops = [acc.loc[g, "fp64"] - acc.loc[g, p] for g in acc.index for p in ("fp32", "fp16")]
        verdict = c.judged(max(drops) <= 1.0) if comparable else c.UNMEASURED
        ev = "; ".join(
            f"{g} GPU: " + "/".join(f"{acc.loc[g, p]:.1f}" for p in ORDER) for g in acc.index
        )
        if not comparable:
            ev += f" ({why})"
    else:
        verdict, ev = c.UNMEASURED, "not every precision ran"
    out.append(
        c.claim(
            "V3c",
            "Accuracy does not drop with lower precision (all about 98-99.5 %)",
            "FP32 and FP16 test accuracy within 1 point of FP64 at every GPU count",
            verdict,
            f"accuracy FP64/FP32/FP16 %: {ev}",
        )
    )
    return out


def build(profile: str) -> Path:
    df, skipped = c.experiment_runs(EXP, profile)
    table = build_table(df)
    notes = []
    if not c.on_gpu(df):
        notes.append(
            "CPU run: FP16 is requested but runs as bf16 autocast (CPU has no useful fp16 "
            "autocast); on a CPU without bf16 instructions this is slower than FP32."
        )
    return c.write_artifact(
        TARGET,
        profile,
        table,
        experiments=[EXP],
        claims=claims(table, c.accuracy_comparable(df)),
        notes=notes,
        paper_csv="table2_precision.csv",
        skipped=skipped,
        figure=False,
    )


if __name__ == "__main__":
    c.main_for(build, __doc__)
