"""How the report words what the analysis wrote: a claim's reason without the caveat said once,
the runs behind a verdict as links, notes that several sections share said once, skipped runs
by reason, the noise floor with the tally, and sentences that end as sentences."""

from __future__ import annotations

import csv
import os
from pathlib import Path
from typing import Any

from analysis.claims import spec as cs
from analysis.claims import verdicts as cl
from analysis.noise import TARGET as NOISE_TARGET
from report.nextgpu import GPU_GATES
from report.tables import cell
from run import store


def sentence(text: str) -> str:
    """Text that ends as a sentence does (a criterion or evidence read from the claims)."""
    text = str(text).rstrip()
    return text if not text or text.endswith((".", "!", "?", ":")) else text + "."


def short_reason(reason: str, claim: dict[str, Any], gates: dict[str, str]) -> str:
    """A claim's reason without the CPU caveat the report states once: a failed GPU gate is
    "needs a GPU" and the GPU-only effect the claim is about (analysis/claims/spec.py)."""
    failed = [g for g in claim.get("needs") or [] if gates.get(g)]
    if reason.startswith(cl.NO_GPU) or (reason and failed and failed[0] in GPU_GATES):
        effect = cs.gpu_only(claim)
        return "needs a GPU" + (f" ({effect})" if effect else "")
    return reason


def run_links(names: list[str], root: Path, profile: str, out_dir: Path) -> list[dict[str, str]]:
    """The runs behind a verdict, each with a path to its folder relative to the report."""
    return [{"name": n, "href": os.path.relpath(store.run_dir(profile, n, root), out_dir)}
            for n in names]  # fmt: skip


def hoisted(sections: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Notes that several sections share are said once, with the experiments they apply to,
    and taken out of those sections."""
    where: dict[str, list[str]] = {}
    for s in sections:
        for n in dict.fromkeys(s["notes"]):
            where.setdefault(n, []).extend(s["experiments"])
    shared = {n: exps for n, exps in where.items() if len(exps) > 1
              and sum(1 for s in sections if n in s["notes"]) > 1}  # fmt: skip
    for s in sections:
        s["notes"] = [n for n in dict.fromkeys(s["notes"]) if n not in shared]
    return [{"text": n, "experiments": exps} for n, exps in shared.items()]


def skipped_by_reason(skipped: list[dict[str, str]]) -> list[dict[str, Any]]:
    """The cells a sweep skipped, one entry per reason with its runs."""
    out: dict[str, list[str]] = {}
    for k in skipped:
        out.setdefault(k["reason"], []).append(k["run"])
    return [{"reason": why, "runs": runs} for why, runs in out.items()]


def noise_floor(root: Path, profile: str) -> list[dict[str, str]]:
    """The run-to-run spread the noise cells measured (table-noise.csv), one entry per workload
    and rank count; [] before N1/N2 have run."""
    path = store.tables_dir(profile, root) / f"{NOISE_TARGET}.csv"
    if not path.is_file():
        return []
    with path.open() as f:
        rows = [r for r in csv.DictReader(f) if r.get("spread_pct") not in (None, "", "nan")]
    return [{"workload": r["workload"], "gpus": r.get("gpus", ""), "runs": r.get("runs", ""),
             "spread": cell(float(r["spread_pct"]))} for r in rows]  # fmt: skip
