"""Next on a GPU node: what the next scale up would cost (its plan) and which of the claims not
measured here it would decide.

The cost is the plan's own (`python -m run.sweep.plan --scale quick --json`, torch-free, run
as a command: report/ imports run/ only through run.store, run.node.profiling and
run.sweep.matrix); its JSON totals are read back. Which claims it decides: those not measured
here only for want of a GPU (every gate that failed is one a GPU node passes) or of GPU counts,
whose experiment the next scale runs on more GPU counts or on a GPU.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from run import store
from run.sweep import matrix as mx

NEXT = {"smoke": "quick", "quick": "paper"}
# gates a GPU node passes whatever it runs (the others: NUMA nodes, nsys, learning, data)
GPU_GATES = {"gpu", "gpu_oom", "htod", "dali_gpu"}


def parse_plan(text: str) -> dict[str, str]:
    """The totals of `python -m run.sweep.plan --json`, as the report prints them; {} when the
    output is not that object."""
    try:
        got = json.loads(text)
    except ValueError:
        return {}
    if not isinstance(got, dict) or not {"runs", "gpu_hours", "wall"} <= set(got):
        return {}
    return {"runs": str(got["runs"]), "gpu_hours": f"{float(got['gpu_hours']):.2f}",
            "wall": str(got["wall"]), "node": str(got.get("node", ""))}  # fmt: skip


def plan_cost(scale: str, root: Path) -> dict[str, str]:
    """The plan's totals for `scale` ({} when it cannot be made here)."""
    try:
        done = subprocess.run(
            [sys.executable, "-m", "run.sweep.plan", "--scale", scale, "--json"],
            cwd=store.REPO, capture_output=True, text=True, timeout=120,
            env={**os.environ, "RESULTS_DIR": str(root.resolve())},
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return {}
    return parse_plan(done.stdout) if done.returncode == 0 else {}


def decides(claim: dict[str, Any], judged: dict[str, Any], gates: dict[str, str] | None,
            ours: set[int], theirs: set[int]) -> bool:  # fmt: skip
    """Whether the next scale decides a claim not measured here: it ran (gates known), every
    gate that failed is a GPU's, and the next scale adds a GPU or GPU counts."""
    if judged.get("verdict") != "not measured" or claim.get("not_implemented") or gates is None:
        return False
    failed = {g for g in claim.get("gates") or [] if gates.get(g)}
    if not failed <= GPU_GATES or not theirs:
        return False
    return bool(failed) or bool(theirs - ours)


def section(scale: str, root: Path, rows: list[dict[str, Any]], gates: dict[str, dict],
            gate_text: dict[str, str], matrix: dict[str, Any]) -> dict[str, Any] | None:  # fmt: skip
    """The next scale, its cost, and the claims not measured here that it would decide; the
    others not measured, each with what it still needs."""
    nxt = NEXT.get(scale)
    if nxt is None or nxt not in mx.scales(matrix):
        return None
    counts: dict[str, tuple[set[int], set[int]]] = {}
    for e in {r["experiment"] for r in rows}:
        try:
            mine = {int(s["gpus"]) for s in mx.expand(e, scale, matrix, 1).specs}
            counts[e] = (mine, {int(s["gpus"]) for s in mx.expand(e, nxt, matrix, 1).specs})
        except mx.MatrixError:  # an experiment a scale cannot expand decides nothing
            counts[e] = (set(), set())
    decided: list[str] = []
    other: dict[str, list[str]] = {}
    for r in rows:
        judged = r["per"][0]
        if judged["verdict"] != "not measured":
            continue
        g = gates.get(r["target"])
        if decides(r["claim"], judged, g, *counts[r["experiment"]]):
            decided.append(r["id"])
        else:
            failed = [gate_text.get(n, n) for n in r["claim"].get("gates") or []
                      if (g or {}).get(n) and n not in GPU_GATES]  # fmt: skip
            why = f"needs {', '.join(failed)}" if failed else judged["reason"]
            other.setdefault(why, []).append(r["id"])
    return {"scale": nxt, "cost": plan_cost(nxt, root), "decided": decided,
            "other": [{"why": why, "ids": ids} for why, ids in other.items()],
            "gpus": ", ".join(str(g) for g in matrix["scales"][nxt]["gpus"])}  # fmt: skip
