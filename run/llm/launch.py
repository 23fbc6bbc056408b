"""The LLM workload as the sweep launches it (with spec.py, run/sweep/workloads.py's Workload).
Imports no torch: the matrix and analysis/ load it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from run.llm import config as llm_config
from run.llm import spec as llm_spec
from run.node import numa, profiling
from run.node.probe import torchrun


def launch_command(spec: dict[str, Any], run_dir: Path, info: dict[str, Any]) -> list[str]:
    """The command the sweep runs (cwd = repository root); stdout/stderr go to the run's log."""
    entry = ["-m", "run.llm.tune", "--run-dir", str(run_dir)]
    if not llm_spec.distributed(spec):
        cmd = [sys.executable, *entry]
    else:
        cmd = [*torchrun(), "--standalone", f"--nproc_per_node={spec['gpus']}", *entry]
    if spec["profiler"] == "nsys":
        # nsys around every rank (torchrun --no-python nsys profile ... python -m run.llm.tune);
        # the window is nsys's --duration (the recipe cannot open a cudaProfilerApi range).
        cmd = profiling.with_nsys(cmd, run_dir, capture_api=False)
    return numa.wrap(cmd, numa.plan(spec["gpus"], info))


def preflight(specs: list[dict[str, Any]]) -> None:
    """Before any run starts, config.py's `prepare` (the check a run makes): the files the specs
    need are made or found there, else one line (a ValueError)."""
    for spec in specs:
        if llm_spec.unsupported_reason(spec):
            continue
        llm_config.prepare(llm_spec.canonical(spec))


def skip_reason(spec: dict[str, Any], info: dict[str, Any]) -> str:
    """No LLM cell depends on more than the GPU count, which the sweep checks itself."""
    return ""
