"""The claims file, `reference/paper/claims.yaml`: its vocabulary (rules, ops, origins), loading,
and the check of every entry's fields without judging it (what `make test` validates).
"""

from __future__ import annotations

import operator
from pathlib import Path
from typing import Any

from run import store, yamlfile
from run.errors import UserError

CLAIMS_FILE = store.REFERENCE_DIR / "claims.yaml"
OPS = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le}
RULES = ("threshold", "compare", "trend", "extreme", "within", "correlation", "spread",
         "dominates", "step", "status", "all")  # fmt: skip
FIELDS = ("experiment", "statement", "source", "criterion")  # what every claim states
# Whose claim: the papers' (the default) or ours, beyond the paper (counted and shown apart).
PAPER, OURS = "paper", "ours"
ORIGINS = (PAPER, OURS)
WITHIN_SIDES = ("both", "below")
# Which cells a rule over several (precisions, GPU counts, templates) needs to pass, as the
# paper's wording has it: every cell, more than half of them, or the aggregate (a mean over them).
CELLS = ("all", "majority", "aggregate")
# The rules that judge cells one by one, and those that read one number over all of them.
PER_CELL_RULES = ("threshold", "compare", "trend", "extreme", "within")
AGGREGATE_ONLY = ("correlation", "spread", "dominates", "step", "status")
# Timed quantities: every comparison of them is judged against the run-to-run noise
# (analysis/noise.py). `difference` quantities are already a percentage difference of two times,
# so the margin is in points (100 x the relative spread); the others are ratios or times.
TIMING_VALUES = ("total_time_s", "s_per_it", "epoch_time_s", "tuning_time_s", "speedup_vs_1gpu",
                 "efficiency_pct", "efficiency_vs_1gpu_pct", "efficiency_vs_fp64_pct",
                 "efficiency_vs_unpinned_pct", "images_per_s", "tokens_per_s", "total_s",
                 "relative_improvement_pct")  # fmt: skip
TIMING_VALUES += tuple(f"{v}_steady" for v in TIMING_VALUES)
DIFFERENCE_VALUES = ("relative_improvement_pct", "relative_improvement_pct_steady")
# A timed verdict uses the steady-state rate wherever a run's warm-up is more than this share of
# its timed total (issue 38; analysis/common.py measures it).
WARMUP_LIMIT_PCT = 10.0
# quantities that already set a pinned run against an unpinned one (V4's table, L2's)
RELATIVE_VALUES = ("efficiency_vs_unpinned_pct", "relative_improvement_pct")

# What a CPU run can decide (issue 26, item 4), one rule for every claim: gloo ranks on CPU cores
# stand in for GPUs in how work is split and timed, but an effect that exists only between a host
# and a GPU has nothing to act on. A claim about such an effect needs a GPU (`gates: [gpu]`),
# whether it says the effect is there or that it is not (a no-op cannot show a non-effect).
GPU_ONLY = {
    "pinning": "pin_memory only changes copies from page-locked host memory to a GPU; on a CPU "
    "it is a no-op, so pinned and unpinned runs differ only by noise",
    "memory layout": "channels_last (NHWC) pays off in a GPU's convolution kernels; on a CPU it "
    "measures other kernels",
    "loader pauses": "the pauses are a GPU waiting for its loader; CPU ranks compute and load on "
    "the same cores, so neither loader shows them",
    "CUDA calls": "CUDA API calls and kernels are recorded only on a GPU",
    "VRAM": "GPU memory and running out of it exist only on a GPU (a CPU run's peak is host RSS)",
    "HtoD copies": "host-to-device copies exist only with a device to copy to",
}
CUDA_METRICS = ("cudaLaunchKernel", "cudaStreamSynchronize", "cudaMemcpyAsync", "cudaEventDestroy",
                "cudaEventSynchronize", "memcpy_htod", "memcpy_dtod", "memcpy_dtoh",
                "nccl_allgather_ring_ll", "nccl_broadcast", "nccl_other")  # fmt: skip


class ClaimError(UserError):
    """claims.yaml is malformed: the message names the claim and the field."""


def load(path: Path = CLAIMS_FILE) -> list[dict[str, Any]]:
    claims = yamlfile.load(path, ClaimError)["claims"]
    for cl in claims:
        check(cl)
        check_cells(cl)
        check_gate(cl)
    ids = [cl["id"] for cl in claims]
    if len(set(ids)) != len(ids):
        raise ClaimError(f"{path}: duplicate claim ids")
    return claims


def check(cl: dict[str, Any]) -> None:
    """A claim's fields, without judging it: what `make test` validates for every entry."""
    cid = cl.get("id", "?")
    for key in ("id", *FIELDS):
        if not cl.get(key):
            raise ClaimError(f"claim {cid}: missing '{key}'")
    if origin(cl) not in ORIGINS:
        raise ClaimError(f"claim {cid}: origin '{cl['origin']}' is not one of {', '.join(ORIGINS)}")
    rule = cl.get("rule")
    if rule is None:
        if not cl.get("not_implemented"):
            raise ClaimError(f"claim {cid}: no rule and no 'not_implemented' reason")
        return
    if rule not in RULES:
        raise ClaimError(f"claim {cid}: unknown rule '{rule}' (one of {', '.join(RULES)})")
    if "noise_rel" in cl:
        raise ClaimError(f"claim {cid}: no margin is a constant of the claims file (noise_rel): "
                         "the run-to-run spread is measured (analysis/noise.py)")  # fmt: skip
    if rule == "all":  # each part is a rule of its own; `part` names it in the evidence
        if len(cl.get("parts") or []) < 2:
            raise ClaimError(f"claim {cid}: rule all needs two or more 'parts'")
        for i, part in enumerate(cl["parts"]):
            if not part.get("part"):
                raise ClaimError(f"claim {cid}: part {i + 1} has no 'part' name")
            check({"id": f"{cid} part {i + 1}", **{k: cl[k] for k in FIELDS}, **part})
        return
    if "aggregate" in cl:
        raise ClaimError(f"claim {cid}: 'aggregate' is now 'cells: aggregate'")
    cells = cl.get("cells")
    if cells is not None and cells not in CELLS:
        raise ClaimError(f"claim {cid}: cells '{cells}' is not one of {', '.join(CELLS)}")
    if rule in AGGREGATE_ONLY and cells not in (None, "aggregate"):
        raise ClaimError(
            f"claim {cid}: rule {rule} reads one number; 'cells' can only be aggregate"
        )
    if cells == "aggregate" and rule not in ("compare", "within", *AGGREGATE_ONLY):
        raise ClaimError(f"claim {cid}: rule {rule} cannot judge an aggregate; use all or majority")
    if cells == "aggregate" and rule == "compare" and "ratio" not in cl:
        raise ClaimError(f"claim {cid}: an aggregate compare needs 'ratio'")
    if "op" in cl and cl["op"] not in OPS:
        raise ClaimError(f"claim {cid}: unknown op '{cl['op']}'")
    if cl.get("side", "both") not in WITHIN_SIDES:
        raise ClaimError(f"claim {cid}: side '{cl['side']}' is not one of "
                         f"{', '.join(WITHIN_SIDES)}")  # fmt: skip
    needs = {"threshold": ("q", "than"), "compare": ("a", "b"), "trend": ("q", "along"),
             "extreme": ("q", "among", "expect"), "within": ("a", "b"),
             "correlation": ("a", "b", "r"), "spread": ("q", "among", "max_rel"),
             "dominates": ("q", "among", "over"), "step": ("q", "along", "than"),
             "status": ("cases",)}[rule]  # fmt: skip
    for key in needs:
        if key not in cl:
            raise ClaimError(f"claim {cid}: rule {rule} needs '{key}'")


def check_cells(cl: dict[str, Any]) -> None:
    """The claims file states for every rule over several cells which must pass (the engine's
    default, all, is for rules written in tests)."""
    for part in cl.get("parts") or [cl]:
        if part.get("rule") in PER_CELL_RULES and "cells" not in part:
            name = f"{cl['id']}" + (f" part {part['part']}" if "part" in part else "")
            raise ClaimError(f"claim {name}: rule {part['rule']} needs 'cells' "
                             f"(one of {', '.join(CELLS)})")  # fmt: skip


def check_gate(cl: dict[str, Any]) -> None:
    """The one rule of what a CPU run can decide, applied to a claim: `gates: [gpu]` exactly when
    the claim is about a GPU-only effect (GPU_ONLY)."""
    effect, gated = gpu_only(cl), "gpu" in (cl.get("gates") or [])
    if effect and not gated:
        raise ClaimError(f"claim {cl['id']}: it is about {effect}, which a CPU run cannot decide "
                         "(analysis/claims/spec.py GPU_ONLY): add 'gpu' to its gates")  # fmt: skip
    if gated and not effect:
        raise ClaimError(f"claim {cl['id']}: gates on gpu, but is about no GPU-only effect "
                         f"({', '.join(GPU_ONLY)}): a CPU run can decide it")  # fmt: skip


def _quantities(cl: dict[str, Any]) -> list[dict[str, Any]]:
    """Every quantity a claim reads (its parts' too), `b` with `a`'s fields under its own."""
    out = []
    for part in cl.get("parts") or [cl]:
        for key in ("q", "a", "b"):
            if key in part:
                base = part["a"] if key == "b" else {}
                where = {**(base.get("where") or {}), **(part[key].get("where") or {})}
                out.append({**base, **part[key], "where": where})
    return out


def gpu_only(cl: dict[str, Any]) -> str:
    """The GPU-only effect a claim is about (a key of GPU_ONLY), or "" when a CPU run can speak
    to it: the one written rule of what a CPU run can decide, read from the claim's quantities."""
    qs = _quantities(cl)
    values = {q.get("value") for q in qs}
    metrics = {m for q in qs for m in _listed((q.get("where") or {}).get("metric"))}
    if values & {"peak_memory_gib", "peak_memory_all_gpus_gib"}:
        return "VRAM"
    if metrics & set(CUDA_METRICS):
        return "CUDA calls"
    if any(case.get("status") == "oom" for case in cl.get("cases") or []):
        return "VRAM"
    if "htod_bytes_per_image" in values:
        return "HtoD copies"
    if values & {"pauses", "boundary_pause_share"}:
        return "loader pauses"
    if _varies(cl, "channels_last"):
        return "memory layout"
    if _varies(cl, "pin_memory"):
        return "pinning"
    return ""


def _listed(v: Any) -> list[Any]:
    return v if isinstance(v, list) else [] if v is None else [v]


def _varies(cl: dict[str, Any], key: str) -> bool:
    """Whether the claim sets cells apart by `key` (a pinned against an unpinned run), rather
    than holding it fixed (pin_memory: false, the paper's default)."""
    for part in cl.get("parts") or [cl]:
        wheres = [(part.get(k) or {}).get("where") or {} for k in ("q", "a", "b")]
        seen = {str(w[key]) for w in wheres if key in w}
        along = {part.get("along"), part.get("among")}
        values = {(part.get(k) or {}).get("value") for k in ("q", "a")}
        if len(seen) > 1 or key in along or (seen and values & set(RELATIVE_VALUES)):
            return True
    return False


def timing(cl: dict[str, Any]) -> str:
    """ "ratio" when the claim compares timed quantities (judged against run-to-run noise),
    "difference" when they are percentage differences of times, else ""."""
    values = {q.get("value") for q in _quantities(cl)}
    if values & set(DIFFERENCE_VALUES):
        return "difference"
    return "ratio" if values & set(TIMING_VALUES) else ""


def values(cl: dict[str, Any]) -> set[str]:
    """The value columns a claim (with its parts) reads."""
    return {str(q["value"]) for q in _quantities(cl) if q.get("value")}


def steady_view(cl: dict[str, Any], columns: list[str], warmup_pct: float | None,
                limit_pct: float) -> tuple[dict[str, Any], str]:  # fmt: skip
    """The claim as judged, and how its times were taken (issue 38): where a run of the table
    spent more than `limit_pct` of its timed total warming up (`warmup_pct`, the largest share)
    and the table has a steady-state twin (`<value>_steady`) of every timed value the claim
    reads, the claim reads the twins; else the totals. "" for a claim that reads no time."""
    timed = {v for v in values(cl) if v in TIMING_VALUES or f"{v}_steady" in columns}
    if not timed or warmup_pct is None or warmup_pct != warmup_pct:
        return cl, ""
    if warmup_pct <= limit_pct or not all(f"{v}_steady" in columns for v in timed):
        return cl, (f"total times (warm-up at most {warmup_pct:.0f} % of a run's timed total)"
                    if warmup_pct <= limit_pct else
                    f"total times: warm-up up to {warmup_pct:.0f} % of a run's timed total, but "
                    "this table has no steady-state rate")  # fmt: skip

    def swap(q: dict[str, Any]) -> dict[str, Any]:
        return {**q, "value": f"{q['value']}_steady"} if q.get("value") in timed else q

    def part(p: dict[str, Any]) -> dict[str, Any]:
        return {**p, **{k: swap(p[k]) for k in ("q", "a", "b") if k in p}}

    out = part(cl)
    if cl.get("parts"):
        out["parts"] = [part(p) for p in cl["parts"]]
    return out, (f"steady-state rate after the warm-up steps (warm-up up to {warmup_pct:.0f} % "
                 "of a run's timed total)")  # fmt: skip


def origin(cl: dict[str, Any]) -> str:
    """`paper` for the papers' claims, `ours` for those beyond the paper."""
    return cl.get("origin", PAPER)


def for_experiments(exps: list[str], claims: list[dict[str, Any]] | None = None) -> list[dict]:
    return [cl for cl in (claims if claims is not None else load()) if cl["experiment"] in exps]
