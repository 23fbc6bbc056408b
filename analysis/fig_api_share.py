"""L7 (J Fig.15): share of time in CUDA API calls by template and method (multi-GPU)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from analysis import common as c
from analysis.profiles import artifact as pa

TARGET, EXP = "fig-api-share", "L7"
TEMPLATES = ["instruct", "summary", "error-correction"]
METHODS = ["lora", "qlora", "dpo", "qat"]
METRICS = ["cudaLaunchKernel", "cudaStreamSynchronize", "memcpy_htod", "cudaEventSynchronize",
           "nccl_allgather_ring_ll"]  # fmt: skip
NEGLIGIBLE_PCT = 1.0
MUCH_MORE = 3.0  # "much time" vs "almost none": DPO and QAT at least this many times LoRA's share


def build_table(runs: pd.DataFrame, tidy: pd.DataFrame) -> pd.DataFrame:
    # + kernel_launch_all beside cudaLaunchKernel; the claims' sums use METRICS, never it
    t = pa.table(runs, tidy, ["dataset", "method", "gpus"], METRICS)
    t = t.assign(o1=t["method"].map(METHODS.index), o2=t["dataset"].map(TEMPLATES.index),
                 k=pa.kind_order(t))  # fmt: skip
    return t.sort_values(["o1", "o2", "k"], kind="mergesort").drop(columns=["o1", "o2", "k"])


def mean_share(t: pd.DataFrame, metrics: list[str], **conds: object) -> float | None:
    """Summed share of `metrics`, averaged over the templates that measured it."""
    vals = []
    for d in TEMPLATES:
        v = pa.summed(t, metrics, "share_pct", dataset=d, **conds)
        if v is not None:
            vals.append(v)
    return sum(vals) / len(vals) if vals else None


def claims(t: pd.DataFrame) -> list[dict[str, str]]:
    methods = [m for m in METHODS if m in set(t["method"])]
    out = []
    text = "These calls take the largest share under QAT"
    crit = "summed share of the five metrics (mean over templates) is highest for QAT"
    if not pa.measured(t, ["cudaLaunchKernel"]):
        out.append(pa.unmeasured_claim("L7a", text, crit, METRICS, t))
    else:
        sh = {m: mean_share(t, METRICS, method=m) for m in methods}
        sh = {m: v for m, v in sh.items() if v is not None}
        ok = None if "qat" not in sh else max(sh, key=sh.get) == "qat"
        out.append(
            c.claim(
                "L7a", text, crit, c.judged(ok), ", ".join(f"{m} {v:.1f} %" for m, v in sh.items())
            )
        )
    text = "DPO and QAT spend much time in cudaStreamSynchronize, LoRA almost none"
    crit = f"cudaStreamSynchronize share (mean over templates) of DPO and of QAT >= {MUCH_MORE:g}x LoRA's"
    if not pa.measured(t, ["cudaStreamSynchronize"]):
        out.append(pa.unmeasured_claim("L7b", text, crit, ["cudaStreamSynchronize"], t))
    else:
        sh = {m: mean_share(t, ["cudaStreamSynchronize"], method=m) for m in ("lora", "dpo", "qat")}
        ok = (
            None
            if None in sh.values()
            else all(sh[m] >= MUCH_MORE * sh["lora"] for m in ("dpo", "qat"))
        )
        out.append(
            c.claim(
                "L7b",
                text,
                crit,
                c.judged(ok),
                ", ".join(f"{m} {pa.fmt(v, '%')}" for m, v in sh.items()),
            )
        )
    text = "HtoD is negligible everywhere"
    crit = f"CUDA memcpy HtoD < {NEGLIGIBLE_PCT:g} % of the profiled time in every run"
    if not pa.measured(t, ["memcpy_htod"]):
        out.append(pa.unmeasured_claim("L7c", text, crit, ["memcpy_htod"], t))
    else:
        v = t[(t["metric"] == "memcpy_htod") & (t["measured"] == True)]["share_pct"]  # noqa: E712
        out.append(
            c.claim(
                "L7c",
                text,
                crit,
                c.judged(bool((v < NEGLIGIBLE_PCT).all())),
                f"max {v.max():.2f} % over {len(v)} runs",
            )
        )
    text = "Differences between methods exceed differences between templates"
    crit = ("range over methods of the summed share (mean over templates) > range over templates "
            "(mean over methods)")  # fmt: skip
    if not pa.measured(t, ["cudaLaunchKernel"]):
        out.append(pa.unmeasured_claim("L7d", text, crit, METRICS, t))
    else:
        by_m = [v for v in (mean_share(t, METRICS, method=m) for m in methods) if v is not None]
        by_t = []
        for d in TEMPLATES:
            vals = [pa.summed(t, METRICS, "share_pct", dataset=d, method=m) for m in methods]
            vals = [v for v in vals if v is not None]
            if vals:
                by_t.append(sum(vals) / len(vals))
        ok = (
            None
            if len(by_m) < 2 or len(by_t) < 2
            else (max(by_m) - min(by_m)) > (max(by_t) - min(by_t))
        )
        ev = (f"range over methods {max(by_m) - min(by_m):.1f} pp, over templates "
              f"{max(by_t) - min(by_t):.1f} pp") if ok is not None else "too few cells"  # fmt: skip
        out.append(c.claim("L7d", text, crit, c.judged(ok), ev))
    return out


def build(profile: str) -> Path:
    runs, skipped = c.experiment_runs(EXP, profile)
    t = build_table(runs, pa.run_metrics(runs, profile))
    return c.write_artifact(TARGET, profile, t, experiments=[EXP], claims=claims(t),
                            notes=pa.notes(t, runs), paper_csv=None, skipped=skipped, figure=True)  # fmt: skip


if __name__ == "__main__":
    c.main_for(build, __doc__)
