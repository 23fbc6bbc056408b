"""L3 (C Fig.5, J Fig.11): profiler metrics by dataset, LoRA on one GPU."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from analysis import common as c
from analysis.profiles import artifact as pa

TARGET, EXP = "fig-llm-api", "L3"
DATASETS = ["alpaca", "grammar", "samsum", "slimorca"]
METRICS = ["cudaLaunchKernel", "cudaStreamSynchronize", "memcpy_htod"]
LARGE_SHARE_PCT = 25.0  # "a large share": launch + sync together at least this much of the window
FLAT = 0.25  # "varies little": (max - min) / mean at most this
NEGLIGIBLE_PCT = 1.0


def build_table(runs: pd.DataFrame, tidy: pd.DataFrame) -> pd.DataFrame:
    t = pa.table(runs, tidy, ["dataset"], METRICS)  # + kernel_launch_all beside cudaLaunchKernel
    its = dict(zip(runs["run"], runs.get("s_per_it", pd.Series([None] * len(runs))), strict=True))
    t.insert(1, "s_per_it", t["run"].map(its))
    t = t.assign(o=t["dataset"].map(DATASETS.index), k=pa.kind_order(t))
    return t.sort_values(["o", "k"], kind="mergesort").drop(columns=["o", "k"])


def claims(t: pd.DataFrame) -> list[dict[str, str]]:
    ds = [d for d in DATASETS if d in set(t["dataset"])]
    out = []
    text = "Kernel launching and synchronisation take a large share of time"
    crit = f"cudaLaunchKernel + cudaStreamSynchronize >= {LARGE_SHARE_PCT:g} % of the profiled time, every dataset"
    if not pa.measured(t, ["cudaLaunchKernel"]):
        out.append(pa.unmeasured_claim("L3a", text, crit, METRICS[:2], t))
    else:
        sh = {d: pa.summed(t, METRICS[:2], "share_pct", dataset=d) for d in ds}
        ok = all(v is not None and v >= LARGE_SHARE_PCT for v in sh.values())
        out.append(
            c.claim(
                "L3a",
                text,
                crit,
                c.judged(ok),
                ", ".join(f"{d} {pa.fmt(v, '%')}" for d, v in sh.items()),
            )
        )
    text = "cudaLaunchKernel time tracks the dataset's iteration time"
    crit = "Pearson correlation of cudaLaunchKernel time and s/it across datasets >= 0.8"
    if not pa.measured(t, ["cudaLaunchKernel"]):
        out.append(pa.unmeasured_claim("L3b", text, crit, ["cudaLaunchKernel"], t))
    else:
        pairs = [
            (
                pa.value(t, "cudaLaunchKernel", dataset=d),
                pa.value(t, "cudaLaunchKernel", "s_per_it", dataset=d),
            )
            for d in ds
        ]
        pairs = [(a, b) for a, b in pairs if a is not None and b is not None]
        r = (
            pd.Series([a for a, _ in pairs]).corr(pd.Series([b for _, b in pairs]))
            if len(pairs) >= 3
            else None
        )
        ok = None if r is None or pd.isna(r) else r >= 0.8
        ev = (
            f"r = {r:.2f} over {len(pairs)} datasets"
            if ok is not None
            else "fewer than 3 datasets with both numbers"
        )
        out.append(c.claim("L3b", text, crit, c.judged(ok), ev))
    text = "cudaStreamSynchronize varies little across datasets"
    crit = f"(max - min) / mean of cudaStreamSynchronize time across datasets <= {FLAT:g}"
    if not pa.measured(t, ["cudaStreamSynchronize"]):
        out.append(pa.unmeasured_claim("L3c", text, crit, ["cudaStreamSynchronize"], t))
    else:
        v = [
            x
            for x in (pa.value(t, "cudaStreamSynchronize", dataset=d) for d in ds)
            if x is not None
        ]
        spread = (max(v) - min(v)) / (sum(v) / len(v)) if v and sum(v) > 0 else None
        out.append(c.claim("L3c", text, crit, c.judged(None if spread is None else spread <= FLAT),
                           f"spread {spread:.2f}" if spread is not None else "no values"))  # fmt: skip
    text = "HtoD memory operations are insignificant"
    crit = f"CUDA memcpy HtoD < {NEGLIGIBLE_PCT:g} % of the profiled time, every dataset"
    if not pa.measured(t, ["memcpy_htod"]):
        out.append(pa.unmeasured_claim("L3d", text, crit, ["memcpy_htod"], t))
    else:
        sh = {d: pa.value(t, "memcpy_htod", "share_pct", dataset=d) for d in ds}
        ok = all(v is not None and v < NEGLIGIBLE_PCT for v in sh.values())
        out.append(
            c.claim(
                "L3d",
                text,
                crit,
                c.judged(ok),
                ", ".join(f"{d} {pa.fmt(v, '%')}" for d, v in sh.items()),
            )
        )
    return out


def build(profile: str) -> Path:
    runs, skipped = c.experiment_runs(EXP, profile)
    t = build_table(runs, pa.run_metrics(runs, profile))
    return c.write_artifact(TARGET, profile, t, experiments=[EXP], claims=claims(t),
                            notes=pa.notes(t, runs), paper_csv=None, skipped=skipped, figure=True)  # fmt: skip


if __name__ == "__main__":
    c.main_for(build, __doc__)
