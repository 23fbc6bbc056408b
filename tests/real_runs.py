"""Real runs made once per test session and read by every test that only reads them.

`make gpu-check`'s check list (run/checks/cases.py) launches, on a CPU with gloo ranks, each
vision precision and strategy, the torch-profiled 2-rank DDP all-reduce, and every LLM recipe at
1 and 2 ranks, through the sweep's own `execute`. tests/test_gpu_check.py asserts that the list
passes; the vision and LLM integration tests and the profiling test read the same runs instead
of launching them again (conftest.py's `cpu_checks` fixture makes them, once, on first use).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from run import store
from run.checks import cases
from run.checks import runner as gpu_check
from run.node import probe
from run.sweep import matrix as mx


@dataclass(frozen=True)
class CheckRun:
    """One check's finished run: its record (pass/fail/skip), its spec and its folder."""

    record: dict[str, Any]
    spec: dict[str, Any]
    run_dir: Path

    def summary(self) -> dict[str, Any]:
        return store.read_json(self.run_dir / store.SUMMARY)


@dataclass
class CheckRuns:
    """Every check's record in list order, the lines gpu-check printed, the machine it saw."""

    records: list[dict[str, Any]]
    lines: list[str]
    info: dict[str, Any]
    runs: dict[str, CheckRun] = field(default_factory=dict)

    def __getitem__(self, name: str) -> CheckRun:
        """A check that ran and passed; a reader of a failed check fails with the check's own
        problems (test_the_check_list_passes_on_cpu names them all)."""
        rec = next(r for r in self.records if r["check"] == name)
        if rec["result"] != "pass":
            why = rec.get("problems") or rec.get("why")
            pytest.fail(f"check {name}: {rec['result']}: {why} ({rec.get('root_cause')})")
        return self.runs[name]


def gloo_machine() -> dict[str, Any]:
    """This machine as the checks see it, with room for 2 gloo ranks however many cores it has
    (gloo ranks need no core of their own; the integration tier has always run 2 of them)."""
    info = probe.probe()
    return {**info, "affinity_cpus": max(2, probe.max_ranks(info))}


def make(names: list[str] | None = None) -> CheckRuns:
    """Run the checks (all, or those named) on a CPU into the current RESULTS_DIR."""
    info = gloo_machine()
    lines: list[str] = []
    records = gpu_check.run_checks(names, info, cuda=False, echo=lines.append)
    out = CheckRuns(records, lines, info)
    ranks = probe.max_ranks(info)
    for rec in records:
        if rec.get("run"):
            check = next(c for c in cases.CHECKS if c.name == rec["check"])
            spec = cases.spec_of(check, ranks)
            run_dir = store.run_dir(gpu_check.SCALE, mx.run_name(spec)).resolve()
            out.runs[rec["check"]] = CheckRun(rec, spec, run_dir)
    return out
