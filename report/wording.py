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
from analysis.noise import MEASURE_LABELS as MEASURES
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
    failed = [g for g in claim.get("gates") or [] if gates.get(g)]
    if reason.startswith(cl.NO_GPU) or (reason and failed and failed[0] in GPU_GATES):
        effect = cs.gpu_only(claim)
        return "needs a GPU" + (f" ({effect})" if effect else "")
    return reason


def run_links(names: list[str], root: Path, scale: str, out_dir: Path) -> list[dict[str, str]]:
    """The runs behind a verdict, each with a path to its folder relative to the report."""
    return [{"name": n, "href": os.path.relpath(store.run_dir(scale, n, root), out_dir)}
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


def noise_floor(root: Path, scale: str) -> list[dict[str, Any]]:
    """The run-to-run spread measured between runs of identical work (table-noise.csv), the
    largest of each workload, quantity and rank count (the margins the verdicts used), one entry
    per workload: {workload, ranks, items: [{measure, spread}]}. [] before any such set ran."""
    path = store.tables_dir(scale, root) / f"{NOISE_TARGET}.csv"
    if not path.is_file():
        return []
    with path.open() as f:
        rows = [r for r in csv.DictReader(f) if r.get("spread_pct") not in (None, "", "nan")]
    top: dict[tuple[str, str, str], tuple[float, bool]] = {}
    for r in rows:
        measure = r.get("measure") or r.get("quantity") or ""
        if measure not in SHOWN:
            continue
        points = r.get("spread_points") not in (None, "", "nan")
        size = float(r["spread_points"]) if points else float(r["spread_pct"])
        key = (r["workload"], measure, r.get("gpus", ""))
        if key not in top or size > top[key][0]:
            top[key] = (size, points)
    out = []
    for workload in dict.fromkeys(k[0] for k in top):
        ranks = sorted({k[2] for k in top if k[0] == workload}, key=lambda g: float(g or 0))
        items = []
        for measure in [m for m in SHOWN if any(k[:2] == (workload, m) for k in top)]:
            got = [top.get((workload, measure, g)) for g in ranks]
            unit = " points" if any(x and x[1] for x in got) else " %"
            sizes = " / ".join(cell(x[0]) if x else "-" for x in got)
            items.append({"measure": MEASURE_LABELS.get(measure, measure), "spread": sizes + unit})
        out.append({"workload": workload, "ranks": " / ".join(ranks), "items": items})
    return out


# the spreads the tally's line names (the table-noise section lists every one)
SHOWN = ("total_time_s", "total_time_s_steady", "s_per_it", "train_loss", "accuracy",
         "quantity")  # fmt: skip
MEASURE_LABELS = {**MEASURES, "quantity": "time"}


def margin_text(p: dict[str, Any]) -> str:
    """A verdict's distance from its criterion beside the run-to-run spread it had to clear, for
    the summary table: "4.9 % vs 20.8 %" (the smallest distance of any comparison, relative to
    what it was compared with; the largest spread of the quantity at its rank counts)."""
    gap, pct, pts = p.get("gap_pct"), p.get("margin_pct"), p.get("margin_points")
    gap_pts = p.get("gap_points")
    if gap is None and gap_pts is None and pct is None and pts is None:
        return ""
    left = (f"{cell(gap)} %" if gap is not None else
            f"{cell(gap_pts)} points" if gap_pts is not None else "-")  # fmt: skip
    if pts is not None:
        right = "not measured" if pts == float("inf") else f"{cell(pts)} points"
    elif pct is None:
        right = "no run-to-run noise"
    else:
        right = "not measured" if pct == float("inf") else f"{cell(pct)} %"
    return f"{left} vs {right}"


def timing_short(p: dict[str, Any]) -> str:
    """How a verdict's times were taken, in a word for the summary table."""
    text = p.get("timing") or ""
    return "steady-state" if text.startswith("steady") else "total" if text else ""
