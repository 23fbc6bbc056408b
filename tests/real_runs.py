"""Real runs made once per test session and read by every test that only reads them.

`make gpu-check`'s check list (run/checks/cases.py) launches, on a CPU with gloo ranks, each
vision precision and strategy, the torch-profiled 2-rank DDP all-reduce, and every LLM recipe at
1 and 2 ranks, through the sweep's own `execute`. tests/test_gpu_check.py asserts that the list
passes; the vision and LLM integration tests and the profiling test read the same runs instead
of launching them again (conftest.py's `cpu_checks` fixture makes them, once, on first use).

On a machine with two cores or more, the one-rank LLM checks run in a second process beside the
one-rank vision checks (each one-rank run computes on one thread, CPU_THREADS_PER_RANK, so the
other core was idle); the two lanes make their own data sets (digits, the tiny llama3 and its
rows), so neither waits on or races the other. The multi-rank checks then run one at a time, as
`make gpu-check` runs them all. Every check still goes through `run_checks`, and the records and
lines come back in the list's order. On a CPU vision-ddp-ds reads multi-vision-ddp-allreduce's
run (cases.Check.cpu_spec: the same spec, torch-profiled; run_checks runs it once).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from run import store
from run.checks import cases
from run.checks import runner as gpu_check
from run.node import lifeline, probe
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


# The workload whose one-rank checks run in the side lane, beside the other one-rank checks.
SIDE_WORKLOAD = "llm"


def one_rank(check: cases.Check, ranks: int) -> bool:
    """A check that runs here on one rank (a check whose spec is bad runs with the rest, where
    run_checks records why)."""
    if cases.skip_reason(check, False, ranks):
        return False
    try:
        return cases.spec_of(check, ranks, cuda=False)["gpus"] == 1
    except Exception:  # noqa: BLE001 - run_checks makes it that check's failure
        return False


def make(names: list[str] | None = None, scratch: Path | None = None) -> CheckRuns:
    """Run the checks (all, or those named) on a CPU into the current RESULTS_DIR; the side
    lane's records and log go to `scratch` (default: a new temporary folder)."""
    info = gloo_machine()
    ranks = probe.max_ranks(info)
    chosen = [c for c in cases.CHECKS if not names or c.name in names]
    single = [c for c in chosen if one_rank(c, ranks)]
    side = [c.name for c in single if c.workload == SIDE_WORKLOAD]
    if len(os.sched_getaffinity(0)) < 2 or len(side) == len(single):
        side = []  # one core (nothing to gain), or nothing to run beside the side lane
    first = [c.name for c in single if c.name not in side]
    rest = [c.name for c in chosen if c.name not in side and c.name not in first]
    done: list[tuple[dict[str, Any], str]] = []
    lane = None
    if side:
        lane = Lane(side, info, scratch or Path(tempfile.mkdtemp(prefix="side-lane-")))
    try:
        done += checks(first, info)
    finally:
        if lane:
            done += lane.finish()
    done += checks(rest, info)
    order = {c.name: i for i, c in enumerate(cases.CHECKS)}
    done.sort(key=lambda pair: order[pair[0]["check"]])
    out = CheckRuns([rec for rec, _ in done], [line for _, line in done], info)
    for rec in out.records:
        if rec.get("run"):
            check = next(c for c in cases.CHECKS if c.name == rec["check"])
            spec = cases.spec_of(check, ranks, cuda=False)
            run_dir = store.run_dir(gpu_check.SCALE, mx.run_name(spec)).resolve()
            out.runs[rec["check"]] = CheckRun(rec, spec, run_dir)
    return out


def checks(names: list[str], info: dict[str, Any]) -> list[tuple[dict[str, Any], str]]:
    """run_checks on these checks (none: nothing, not the whole list): (record, line) pairs."""
    if not names:
        return []
    lines: list[str] = []
    records = gpu_check.run_checks(names, info, cuda=False, echo=lines.append)
    return list(zip(records, lines, strict=True))  # run_checks echoes one line per check


class Lane:
    """Checks run by `python tests/real_runs.py` in a process of their own (its main thread runs
    them, as in `make gpu-check`), into the same RESULTS_DIR and data folders (environment)."""

    def __init__(self, names: list[str], info: dict[str, Any], folder: Path) -> None:
        self.names = names
        folder.mkdir(parents=True, exist_ok=True)
        self.out, self.log = folder / "records.json", folder / "lane.log"
        self.out.unlink(missing_ok=True)
        store.write_json_atomic(folder / "info.json", info)
        path = os.pathsep.join([str(store.REPO), os.environ.get("PYTHONPATH", "")])
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(
                [sys.executable, __file__, str(folder / "info.json"), str(self.out), *names],
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONPATH": path},
                preexec_fn=lifeline.tie_to_parent,  # a killed pytest leaves no lane running
            )

    def finish(self) -> list[tuple[dict[str, Any], str]]:
        """Wait for the lane (stop it if this process is being interrupted); a check the lane
        left without a record fails, with the lane's last log lines as its problem."""
        try:
            rc = self.proc.wait()
        except BaseException:
            self.proc.terminate()
            self.proc.wait()
            raise
        got = json.loads(self.out.read_text()) if self.out.is_file() else {"pairs": []}
        pairs = [(rec, line) for rec, line in got["pairs"]]
        have = {rec["check"] for rec, _ in pairs}
        tail = " | ".join(self.log.read_text(errors="replace").strip().splitlines()[-5:])
        for name in self.names:
            if name not in have:
                why = f"the side lane (exit status {rc}) left no record: {tail}"
                rec = {"check": name, "run": None, "result": "fail", "problems": [why]}
                pairs.append((rec, f"FAIL {name}: {why}"))
        return pairs


def _lane_main(argv: list[str]) -> int:
    info_path, out_path, *names = argv
    info = json.loads(Path(info_path).read_text())
    pairs = checks(names, info)
    store.write_json_atomic(Path(out_path), {"pairs": pairs})
    return 0


if __name__ == "__main__":
    sys.exit(_lane_main(sys.argv[1:]))
