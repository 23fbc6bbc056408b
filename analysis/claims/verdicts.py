"""The verdict on one claim (README "Claims are data"): its rule's outcome on our table and on the
paper's, the gates, and which GPU counts decided it. A claim with a range (the paper's min-max)
has two parts, direction (the verdict) and size; `verdict_text` says both.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from analysis.claims import spec as cs
from analysis.claims.outcome import Outcome
from analysis.claims.quantities import num
from analysis.claims.rules import judge_rule
from analysis.claims.spec import OURS, origin
from analysis.noise import scope

HOLDS, FAILS, INCONCLUSIVE, UNMEASURED = "holds", "does not hold", "inconclusive", "not measured"
VERDICTS = (HOLDS, FAILS, INCONCLUSIVE, UNMEASURED)  # in the report's order
# A gate that fails makes a claim "not measured", except these, which make it "inconclusive":
# the quantity exists, but the runs cannot speak for the paper's (a model that did not learn).
INCONCLUSIVE_GATES = ("learned", "learned_scenario_b")
NO_GPU = "needs a GPU: these runs used gloo ranks on CPU cores"  # the driver's default gpu gate
SPREAD_REASON = ("the difference is within the cells' spread (the repeats' min-max, or a "
                 "steady-state time's within-run spread)")  # fmt: skip
# A verdict on CPU ranks standing in for GPUs says so in its label, and is tallied apart.
STAND_IN = "CPU stand-in"


def outcome(cl: dict[str, Any], t: pd.DataFrame | None, noise: float | None = None) -> Outcome:
    """The claim's rule on table `t`; `noise` is the relative run-to-run spread its comparisons of
    single runs must clear (None: not applied, as for the paper's published numbers)."""
    if t is None or t.empty or cl.get("rule") is None:
        return Outcome(None, why="no data")
    return judge_rule({**cl, "_noise": noise}, t)


def verdict_of(o: Outcome) -> str:
    if o.ok is None:
        return UNMEASURED
    if o.overlap:
        return INCONCLUSIVE
    return HOLDS if o.ok else FAILS


def coverage(o: Outcome, paper_gpus: list[int], beyond: bool = False) -> str:
    """Which GPU counts decided a verdict, beside the paper's (for a claim of our own, the
    counts our paper scale runs: the papers never ran those experiments)."""
    if not o.gpus or not paper_gpus:
        return ""
    ours, theirs = _span(sorted(int(g) for g in o.gpus)), _span(sorted(paper_gpus))
    if beyond:
        return f"judged on {ours} GPU(s) (the paper scale runs {theirs})"
    return f"judged on {ours} of the paper's {theirs} GPUs"


def _span(xs: list[int]) -> str:
    if len(xs) > 1 and xs == list(range(xs[0], xs[-1] + 1)):
        return f"{xs[0]}-{xs[-1]}"
    return ", ".join(map(str, xs))


def judge(
    cl: dict[str, Any],
    ours: pd.DataFrame | None,
    paper: pd.DataFrame | None = None,
    gates: dict[str, str] | None = None,
    paper_gpus: list[int] | None = None,
    noise: Any = None,
    noise_text: str = "",
    workload: str = "",
    stand_in: bool = False,
) -> dict[str, Any]:
    """The verdict on one claim: ours, the paper's own (self-check) and what decided both.

    `noise`: the run-to-run spread its comparisons of single runs must clear: a relative number
    (`noise_text` names it), or the results folder's measured floor (analysis/noise.py `Floor`),
    which gives the largest spread of the claim's quantity at its rank counts for `workload`.
    Times are the steady-state rate where the table's runs spent more than the limit warming up
    (spec.steady_view). `stand_in`: the runs were CPU ranks standing in for GPUs; the verdict's
    label says so."""
    judged, timing, points = cl, "", False
    margin_of: dict[str, Any] | None = None
    if ours is not None and len(ours) and "warmup_share_pct" in ours:
        share = pd.to_numeric(ours["warmup_share_pct"], errors="coerce").max()
        judged, timing = cs.steady_view(cl, list(ours.columns), share, cs.WARMUP_LIMIT_PCT)
    margin: float | None = None
    if hasattr(noise, "margin"):
        first = outcome(judged, ours, None)
        rules = {p.get("rule") for p in judged.get("parts") or [judged]}
        against = bool(rules & {"threshold", "step"})  # a ratio set against a constant
        margin, noise_text, points = noise.margin(workload, cs.values(judged), first.gpus,
                                                  against)  # fmt: skip
        measures, ranks = scope(workload, cs.values(judged), first.gpus, against)
        margin_of = {"workload": workload, "measures": measures, "gpus": ranks}
    elif noise is not None and cs.timing(cl):  # a bare number is a timing noise (tests)
        margin = float(noise)
    if points:
        judged = {**judged, "_noise_points": True}
    mine = outcome(judged, ours, margin)
    theirs = outcome(cl, paper) if paper is not None else Outcome(None, why="no published data")
    verdict, reason = verdict_of(mine), mine.why
    for gate in cl.get("gates", []):
        why = (gates or {}).get(gate)
        if not why:
            continue
        if gate not in INCONCLUSIVE_GATES:
            # the gate says why nothing could be measured, which beats a missing-rows reason
            # the generic "no GPU" line says which GPU-only effect the claim is about
            effect = cs.gpu_only(cl) if why == NO_GPU else ""
            verdict, reason = UNMEASURED, why + (f" ({cs.GPU_ONLY[effect]})" if effect else "")
            break
        if verdict != UNMEASURED:
            verdict, reason = INCONCLUSIVE, why
    if cl.get("not_implemented"):
        verdict, reason = UNMEASURED, f"not implemented yet: {cl['not_implemented']}"
    measured = margin is not None
    if verdict == INCONCLUSIVE and not reason:
        reason = (f"the margin is inside the {noise_text or 'run-to-run noise'}"
                  if mine.quiet and measured else SPREAD_REASON)  # fmt: skip
    decided = verdict != UNMEASURED
    settled = {HOLDS: True, FAILS: False}.get(verdict)
    out: dict[str, Any] = {
        "id": cl["id"],
        "origin": origin(cl),
        "experiment": cl["experiment"],
        "statement": cl["statement"],
        "source": cl["source"],
        "criterion": cl["criterion"],
        "verdict": verdict,
        "reason": reason,
        "evidence": "; ".join(mine.facts),
        "paper_verdict": verdict_of(theirs),
        "paper_evidence": "; ".join(theirs.facts) if theirs.ok is not None else theirs.why,
        "coverage": coverage(mine, paper_gpus or [], origin(cl) == OURS) if decided else "",
        "in_paper_range": None,
        "paper_range": None,
        "verdict_text": verdict,
        "noise": noise_text if measured and decided else "",
        "cells": mine.cell_text if decided else "",
        "runs": sorted(mine.runs) if decided else [],
        # the summary's numbers (issue 38): our value(s), the paper's, the smallest distance of a
        # comparison from its criterion against the margin, and how the times were taken
        "ours": values_text(mine.values, cl) if decided else "",
        "paper_value": values_text(theirs.values, cl) if theirs.ok is not None else "",
        "margin_pct": None if margin is None or not decided or points else 100.0 * margin,
        "margin_points": margin if points and decided else None,
        "margin_of": margin_of if margin is not None and decided else None,
        "gap_pct": _pct(mine.deciding_gap(settled)) if decided and not points else None,
        "gap_points": mine.deciding_gap(settled, True) if decided and points else None,
        "timing": timing if decided else "",
        "stand_in": bool(stand_in),
    }
    if cl.get("range") == "paper" and theirs.values:
        lo, hi = min(theirs.values), max(theirs.values)
        out["paper_range"] = [lo, hi]
        if mine.values:
            out["in_paper_range"] = all(lo <= v <= hi for v in mine.values)
            if verdict in (HOLDS, FAILS):  # two parts: direction (the verdict), and size
                size = "inside" if out["in_paper_range"] else "outside"
                unit = cl.get("unit", "")
                out["verdict_text"] = (
                    f"{verdict} in direction; size {size} the paper's {num(lo)}-{num(hi)}{unit}"
                )
    if stand_in and verdict != UNMEASURED:
        out["verdict_text"] = f"{out['verdict_text']} ({STAND_IN})"
    return out


def _pct(x: float | None) -> float | None:
    return None if x is None else 100.0 * x


def values_text(values: list[float], cl: dict[str, Any]) -> str:
    """A claim's primary numbers for the summary: one number, or the range of several."""
    vals = sorted(v for v in values if v == v)
    if not vals:
        return ""
    unit = cl.get("unit", "") if cl.get("rule") in ("threshold",) else ""
    if len(vals) == 1 or vals[0] == vals[-1]:
        return f"{num(vals[0])}{unit}"
    return f"{num(vals[0])}-{num(vals[-1])}{unit} ({len(vals)} values)"
