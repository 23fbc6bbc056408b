"""L9 (J Fig.17): bytes moved per direction (HtoD, DtoD, DtoH) by template and method."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from analysis import common as c
from analysis.profiles import artifact as pa
from analysis.profiles.metrics import MEMCPY_METRICS

TARGET, EXP = "fig-transfers", "L9"
TEMPLATES = ["instruct", "summary", "error-correction"]
METHODS = ["lora", "qlora", "dpo", "qat"]
FACTOR = 4.0


def build_table(runs: pd.DataFrame, tidy: pd.DataFrame) -> pd.DataFrame:
    t = pa.table(runs, tidy, ["dataset", "method", "gpus"], list(MEMCPY_METRICS), cpu=True)
    t = t.assign(o1=t["method"].map(METHODS.index), o2=t["dataset"].map(TEMPLATES.index))
    return t.sort_values(["o1", "o2", "kind"], kind="mergesort").drop(columns=["o1", "o2"])


def claims(t: pd.DataFrame) -> list[dict[str, str]]:
    out = []
    total = {(d, m): pa.summed(t, list(MEMCPY_METRICS), "bytes", dataset=d, method=m)
             for d in TEMPLATES for m in METHODS}  # fmt: skip
    text = "QAT and DPO move over 4x the data LoRA moves"
    crit = (
        f"total bytes (HtoD + DtoD + DtoH) of QAT and of DPO > {FACTOR:g}x LoRA's, every template"
    )
    if not pa.measured(t, ["memcpy_htod"]):
        out.append(pa.unmeasured_claim("L9a", text, crit, list(MEMCPY_METRICS), t))
    else:
        oks, ev = [], []
        for d in TEMPLATES:
            lora = total[(d, "lora")]
            for m in ("dpo", "qat"):
                if lora and total[(d, m)] is not None:
                    oks.append(total[(d, m)] > FACTOR * lora)
                    ev.append(f"{d} {m}/lora {total[(d, m)] / lora:.1f}x")
        out.append(
            c.claim(
                "L9a", text, crit, c.judged(all(oks) if oks else None), "; ".join(ev) or "no pairs"
            )
        )
    text = "Error Correction moves the least data"
    crit = "for every method, error-correction has the fewest total bytes of the three templates"
    if not pa.measured(t, ["memcpy_htod"]):
        out.append(pa.unmeasured_claim("L9b", text, crit, list(MEMCPY_METRICS), t))
    else:
        oks, ev = [], []
        for m in METHODS:
            vals = {d: total[(d, m)] for d in TEMPLATES if total[(d, m)] is not None}
            if len(vals) == len(TEMPLATES):
                oks.append(min(vals, key=vals.get) == "error-correction")
                ev.append(f"{m}: " + "/".join(f"{v / 1e6:.1f}" for v in vals.values()) + " MB")
        out.append(
            c.claim(
                "L9b",
                text,
                crit,
                c.judged(all(oks) if oks else None),
                "; ".join(ev) or "no complete method",
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
