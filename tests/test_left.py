"""What is left (run/sweep/left.py), the one reading of what is missing that the sweep, the plan
and the Makefile share: a sweep is stale exactly when something it would do is undone, and a cell
this machine cannot run is `skipped` with its reason, never `missing`."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from run import store
from run.sweep import left, plan
from run.sweep import matrix as mx
from run.vision import launch as vision_launch

REAL_MATRIX = Path(__file__).resolve().parent.parent / "experiments" / "matrix.yaml"

sys.path.insert(0, str(Path(__file__).parent))
from fake_hw import CPU2  # noqa: E402
from made_runs import fabricate  # noqa: E402

NO_NUMACTL = "numactl is not installed"


@pytest.fixture
def real(tmp_path, monkeypatch):
    """The repository's matrix, an empty results folder, the default settings, no numactl."""
    monkeypatch.setenv("RESULTS_DIR", str(tmp_path / "results"))
    for var in ("PROFILER", "REPEATS", "LLAMA3_DIR", "LLAMA3_TOKENIZER", "MATRIX_FILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(vision_launch.shutil, "which", lambda cmd: None)
    return mx.load_matrix(REAL_MATRIX)


def missing(rows: list[plan.PlanRow]) -> set[str]:
    return {r.name for r in rows if r.state == "missing"}


def test_a_finished_sweep_is_stale_once_anything_it_did_is_undone(real, tmp_path):
    [record] = fabricate(tmp_path / "results", "smoke", ["L2"], CPU2)
    assert left.stale("smoke", ["L2"], CPU2, real) == []
    assert missing(plan.build("smoke", ["L2"], CPU2, real)) == set()
    runs = [e["run"] for e in store.read_json(record)["runs"]]
    summary = store.run_dir("smoke", runs[0]) / store.SUMMARY
    good = summary.read_text()
    # a failed run is one the sweep keeps, as the plan does
    summary.write_text('{"status": "failed", "error": "x"}')
    assert left.stale("smoke", ["L2"], CPU2, real) == []
    for undone in ('{"status": "o', "[]", None):  # truncated, no status, deleted
        if undone is None:
            summary.unlink()
        else:
            summary.write_text(undone)
        assert left.stale("smoke", ["L2"], CPU2, real) == ["L2"]
        assert missing(plan.build("smoke", ["L2"], CPU2, real)) == {runs[0]}
    summary.write_text(good)
    text = record.read_text()
    for bad in ("", "{", '{"runs": 3}', '{"runs": [{"name": "x"}]}'):
        record.write_text(bad)
        assert left.stale("smoke", ["L2"], CPU2, real) == ["L2"]
    record.unlink()
    assert left.stale("smoke", ["L2", "N2"], CPU2, real) == ["L2", "N2"]
    record.write_text(text)
    assert left.stale("smoke", ["L2"], CPU2, real) == []


def test_a_setting_that_renames_runs_makes_the_record_stale_both_ways(real, tmp_path, monkeypatch):
    fabricate(tmp_path / "results", "smoke", ["L2"], CPU2)
    monkeypatch.setenv("REPEATS", "2")
    assert left.stale("smoke", ["L2"], CPU2, real) == ["L2"]
    fabricate(tmp_path / "results", "smoke", ["L2"], CPU2)  # the REPEATS=2 sweep
    assert left.stale("smoke", ["L2"], CPU2, real) == []
    monkeypatch.delenv("REPEATS")
    # every run is there, but the record names the repeats: the table must be made without them
    assert missing(plan.build("smoke", ["L2"], CPU2, real)) == set()
    assert left.stale("smoke", ["L2"], CPU2, real) == ["L2"]


def test_numa_bind_cells_without_numactl_are_skipped_with_the_reason_never_missing(real, tmp_path):
    rows = plan.build("smoke", ["V11"], CPU2, real)
    bind = [r for r in rows if r.spec["numa"] == "bind"]
    assert len(bind) == 2 and all(r.state == "skipped" and NO_NUMACTL in r.reason for r in bind)
    assert all(r.est_s == 0 for r in bind)
    assert all(r.state == "missing" for r in rows if r not in bind)
    text = plan.render(rows, CPU2, "smoke")
    assert "2 run(s) skipped" in text and text.count(NO_NUMACTL) == 2
    # the sweep's record lists them skipped: nothing is left, and nothing is missing
    [record] = fabricate(tmp_path / "results", "smoke", ["V11"], CPU2)
    skipped = {e["run"] for e in store.read_json(record)["skipped"]}
    assert skipped == {r.name for r in bind}
    assert left.stale("smoke", ["V11"], CPU2, real) == []
    after = plan.build("smoke", ["V11"], CPU2, real)
    assert missing(after) == set() and {r.name for r in after if r.state == "skipped"} == skipped
    assert "wall time on this node: nothing to run" in plan.render(after, CPU2, "smoke")


def test_numactl_installed_later_makes_the_skipped_cells_missing(real, tmp_path, monkeypatch):
    fabricate(tmp_path / "results", "smoke", ["V11"], CPU2)
    monkeypatch.setattr(vision_launch.shutil, "which", lambda cmd: f"/usr/bin/{cmd}")
    rows = plan.build("smoke", ["V11"], CPU2, real)
    assert {r.name for r in rows if r.spec["numa"] == "bind"} == missing(rows)
    assert left.stale("smoke", ["V11"], CPU2, real) == ["V11"]


def test_a_finished_numa_bind_run_is_kept_without_numactl(real, tmp_path, monkeypatch):
    """Results made on a node with numactl, read where there is none: the run is done."""
    monkeypatch.setattr(vision_launch.shutil, "which", lambda cmd: f"/usr/bin/{cmd}")
    fabricate(tmp_path / "results", "smoke", ["V11"], CPU2)
    monkeypatch.setattr(vision_launch.shutil, "which", lambda cmd: None)
    rows = plan.build("smoke", ["V11"], CPU2, real)
    assert {r.state for r in rows} == {"done"} and left.stale("smoke", ["V11"], CPU2, real) == []


def test_a_plan_for_another_node_skips_by_rank_count_alone(real):
    """`--gpus N` or the paper's node on a laptop: numactl and memory are that node's business."""
    rows = plan.build("smoke", ["V11"], CPU2, real, target_gpus=2)
    assert {r.state for r in rows} == {"missing"}
    one = plan.build("smoke", ["V11"], CPU2, real, target_gpus=1)
    reasons = {r.reason for r in one if r.state == "skipped"}
    assert reasons == {"needs 2 ranks, the node has 1 GPU(s)"}


def test_the_command_prints_the_stale_sweeps_on_one_line(real, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(left.hw, "probe", lambda: dict(CPU2))
    fabricate(tmp_path / "results", "smoke", ["N1"], CPU2)
    assert left.main(["--scale", "smoke", "--exp", "N1", "--exp", "N2"]) == 0
    assert capsys.readouterr().out == "stale: N2\n"
    assert left.main(["--scale", "smoke", "--exp", "V99"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "V99" in err[0]
