"""One truth about what is missing, on real smoke runs: for a target, what `make plan` lists as
missing is exactly what the next `make <target>` launches; afterwards `make plan` lists nothing
missing, `make -q` exits 0, and the table and the report are made again from the runs that exist.
Walked after each way a user (or a crash) can undo part of a finished target: a run folder
deleted, the sweep record deleted, the table deleted, a summary.json corrupted, and a setting that
renames the runs changed and changed back.

The target is table-llm-pinmem (L2) with the noise cells every table reads (N1, N2), on a copy of
the matrix (MATRIX_FILE) that keeps them at one rank, one repeat and a couple of steps: 3 tiny runs
to start with (N2's run is L2's unpinned one), then 0 or 1 run per case, and 3 for REPEATS=2.
"""

from __future__ import annotations

import csv
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from run import store

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[1]
TARGET = "table-llm-pinmem"
EXPS = ("L2", "N1", "N2")
LAUNCH = re.compile(r"^\[\d+/\d+\] (\S+) \(est\. ", re.M)  # run/sweep/progress.py's start line
# run/sweep/plan.py's run lines: state, ..., name, [experiments]
PLAN_ROW = re.compile(
    r"^(done|missing|failed|oom|unsupported|skipped) .*?  (\S+)  \[([^\]]*)\]", re.M
)


@pytest.fixture(scope="module")
def walk(tmp_path_factory: pytest.TempPathFactory) -> dict:
    tmp = tmp_path_factory.mktemp("truth")
    matrix = yaml.safe_load((REPO / "experiments" / "matrix.yaml").read_text())
    smoke, exps = matrix["scales"]["smoke"], matrix["experiments"]
    smoke["gpus"] = [1]  # L2's from-scale GPU counts
    for e in ("N1", "N2"):
        exps[e]["repeats"] = 1
        exps[e]["busy_repeats"] = 0  # no run beside a busy core here
        exps[e]["vary"]["gpus"]["smoke"] = [1]
    # The walk reads run names and states, never their numbers: the smallest runs that finish
    # (N1 trains 2 steps, not 2 epochs of 16; L2 and N2 tune 2 steps, not 8, still one shared run)
    smoke["vision"]["test_images"] = 32
    exps["N1"]["fixed"]["train_images"]["smoke"], exps["N1"]["fixed"]["epochs"]["smoke"] = 32, 1
    exps["L2"]["fixed"]["max_steps"]["smoke"] = exps["N2"]["fixed"]["max_steps"] = 2
    (tmp / "matrix.yaml").write_text(yaml.safe_dump(matrix, sort_keys=False))
    drop = ("PROFILER", "REPEATS", "PROFILE", "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "LLAMA3_DIR",
            "LLAMA3_TOKENIZER", "LLM_DATASETS_DIR")  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(RESULTS_DIR=str(tmp / "results"), MATRIX_FILE=str(tmp / "matrix.yaml"))
    return {"tmp": tmp, "env": env, "res": tmp / "results" / "smoke"}


def make(walk: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["make", "--no-print-directory", "PROFILE=smoke", *args],
        cwd=REPO, env=walk["env"], capture_output=True, text=True, timeout=900,
    )  # fmt: skip


def plan(walk: dict, *settings: str) -> dict[str, tuple[str, list[str]]]:
    """`make plan ARTIFACTS=<target>`: run name -> (state, experiments)."""
    done = make(walk, "plan", f"ARTIFACTS={TARGET}", *settings)
    assert done.returncode == 0, done.stderr
    rows = {m[2]: (m[1], m[3].split()) for m in PLAN_ROW.finditer(done.stdout)}
    assert rows and {e for _, exps in rows.values() for e in exps} == set(EXPS), done.stdout
    return rows


def missing(rows: dict[str, tuple[str, list[str]]]) -> set[str]:
    return {name for name, (state, _) in rows.items() if state == "missing"}


def table_runs(walk: dict) -> set[str]:
    with open(walk["res"] / "tables" / f"{TARGET}.csv") as fh:
        return {row["run"] for row in csv.DictReader(fh)}


def times(walk: dict) -> tuple[int, int]:
    """When the table and the report were last written (0: not there)."""
    paths = (walk["res"] / "tables" / f"{TARGET}.csv", walk["res"] / "report" / "report.md")
    return tuple(p.stat().st_mtime_ns if p.exists() else 0 for p in paths)  # type: ignore[return-value]


def make_target(walk: dict, *settings: str) -> set[str]:
    """Plan, make, plan: the make launches exactly what the plan listed as missing; then nothing is
    missing, make -q calls the target done, and the table (and the report after it) is made
    again from the runs of L2 the plan names. Returns what was missing."""
    before, written = plan(walk, *settings), times(walk)
    assert make(walk, "-q", TARGET, *settings).returncode == 1  # something to do
    done = make(walk, TARGET, *settings)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert set(LAUNCH.findall(done.stdout)) == missing(before), done.stdout
    after = plan(walk, *settings)
    assert set(after) == set(before) and {s for s, _ in after.values()} == {"done"}
    assert make(walk, "-q", TARGET, *settings).returncode == 0
    assert table_runs(walk) == {name for name, (_, exps) in after.items() if "L2" in exps}
    table, report = times(walk)
    assert table > written[0] and report > written[1] and report >= table
    walk["rows"] = after
    return missing(before)


def l2_run(walk: dict, pinned: bool) -> Path:
    """One of L2's runs, by the plan the last make_target ended on (no `make plan` of its own)."""
    name = next(n for n in walk["rows"] if "alpaca" in n and ("-pin-" in n) == pinned)
    return walk["res"] / "runs" / name


# The cases run in order on one results folder: each starts from the target the last one made.


def test_a_fresh_target_runs_what_the_plan_lists(walk):
    assert len(make_target(walk)) == 3  # N1's run, L2's two (N2's is L2's unpinned run)


def test_a_deleted_run_folder_is_run_again(walk):
    run = l2_run(walk, pinned=True)
    shutil.rmtree(run)
    assert make_target(walk) == {run.name}


def test_a_deleted_sweep_record_is_made_again_without_running(walk):
    record = walk["res"] / "sweeps" / "L2.json"
    record.unlink()
    assert make_target(walk) == set() and record.is_file()


def test_a_deleted_table_is_made_again_without_running(walk):
    (walk["res"] / "tables" / f"{TARGET}.csv").unlink()
    assert make_target(walk) == set()


def test_a_corrupt_summary_is_run_again(walk):
    run = l2_run(walk, pinned=False)  # N2's run too: both sweeps take it up
    (run / store.SUMMARY).write_text('{"status": "o')
    assert make_target(walk) == {run.name}


def test_a_setting_that_renames_runs_runs_them_and_back_again_rebuilds_from_the_first(walk):
    assert len(make_target(walk, "REPEATS=2")) == 3  # a second seed of each of the 3 runs
    assert len(table_runs(walk)) == 4
    # back to one repeat: every run is there, but the record names the seed-1 runs too
    assert make_target(walk) == set()
    assert len(table_runs(walk)) == 2


FAKE_SMI = """#!/bin/sh
# nvidia-smi of a node with one H100 and a CUDA 13 driver (run/node/probe.py's queries)
case "$*" in
  *--query-gpu*) echo "0, NVIDIA H100 80GB HBM3, 81559, 00000000:19:00.0, 580.65.06, GPU-1" ;;
  -L) echo "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)" ;;
  topo*) echo "GPU0 X" ;;
  *) echo "| NVIDIA-SMI 580.65.06  Driver Version: 580.65.06  CUDA Version: 13.0 |" ;;
esac
"""


def test_a_gpu_node_whose_torch_cannot_use_it_stops_before_any_run(tmp_path):
    """`make all` with runs left on a node whose nvidia-smi lists a GPU that this (CPU) torch
    cannot use: the CUDA check stops it in one line, before the plan and any sweep."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text(FAKE_SMI)
    (bin_dir / "nvidia-smi").chmod(0o755)
    drop = ("PROFILER", "REPEATS", "PROFILE", "MAKEFLAGS", "MFLAGS", "MAKELEVEL")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env['PATH']}", RESULTS_DIR=str(tmp_path / "results"))
    done = subprocess.run(["make", "--no-print-directory", "all", "PROFILE=smoke"], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout == ""  # no plan, no sweep
    err = [ln for ln in done.stderr.splitlines() if not ln.startswith("make: ***")]
    assert len(err) == 1 and "is a CPU build" in err[0], done.stderr
    assert "check-cuda" in done.stderr.splitlines()[-1]
    assert not (tmp_path / "results").exists()
