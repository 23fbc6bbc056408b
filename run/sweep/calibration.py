"""Local calibration: the cost model's estimates against the runs this machine has finished."""

from __future__ import annotations

import statistics
from typing import Any

from run import store
from run.node import profiling
from run.sweep.cost import estimate_s, on_gpu
from run.sweep.paper import PAPER_GPU
from run.sweep.workloads import WORKLOADS


def _same_kind(hardware: dict[str, Any] | None, info: dict[str, Any]) -> bool:
    """Whether a run's recorded hardware is the kind of machine `info` describes."""
    if not hardware:
        return True
    if not on_gpu(info):
        return not hardware.get("gpu_count")
    if not hardware.get("gpu_count"):
        return False
    model = str(hardware.get("gpu_model") or "")
    if info.get("assumed_node"):
        return PAPER_GPU in model
    return model == str(info.get("gpu_model") or "")


def calibration_detail(
    scale: str, info: dict[str, Any], matrix: dict[str, Any]
) -> dict[str, tuple[float, int]]:
    """Per workload with such runs: (the calibration factor, number of runs)."""
    ratios: dict[str, list[float]] = {}
    base = store.runs_dir(scale)
    if not base.is_dir():
        return {}
    windows: dict[str, dict[str, Any]] = {}
    for d in sorted(base.iterdir()):
        if d.name.startswith(".") or not d.is_dir():
            continue
        summary = store.read_summary(d) or {}  # an unreadable run reads as failed: left out
        wall = summary.get("launch_wall_s")
        if summary.get("status") != "ok" or not isinstance(wall, (int, float)) or wall <= 0:
            continue
        try:
            spec = store.read_json(d / store.SPEC)  # read_summary found it an object
        except (OSError, ValueError):
            continue
        prov = d / store.PROVENANCE
        if prov.is_file():
            try:
                hardware = store.read_json(prov).get("hardware")
            except (OSError, ValueError, AttributeError):  # AttributeError: not an object
                hardware = None
            if not _same_kind(hardware, info):
                continue
        workload = spec.get("workload")
        if workload not in WORKLOADS:
            continue
        if workload not in windows:
            windows[workload] = profiling.window_for(scale, workload, matrix)
        try:
            est = estimate_s(spec, info, windows[workload])
        except (KeyError, TypeError, ValueError):
            continue  # a spec of an older layout: not worth failing the plan for
        if est > 0:
            ratios.setdefault(workload, []).append(wall / est)
    return {w: (statistics.median(r), len(r)) for w, r in ratios.items()}


def calibration(scale: str, info: dict[str, Any], matrix: dict[str, Any]) -> dict[str, float]:
    """The calibration factor per workload, 1.0 where no run exists (module docstring)."""
    detail = calibration_detail(scale, info, matrix)
    return {w: detail[w][0] if w in detail else 1.0 for w in WORKLOADS}
