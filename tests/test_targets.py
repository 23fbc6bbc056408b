"""The target -> experiment map lives only in experiments/matrix.yaml: the Makefile reads it with
experiments/targets.awk, which must agree with run/sweep/matrix.py's own parse."""

from __future__ import annotations

import os
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from analysis import driver
from analysis.common import AnalysisError
from run.sweep import matrix as mx


def test_awk_reads_the_same_targets_as_python():
    out = subprocess.run(
        ["awk", "-f", "experiments/targets.awk", "experiments/matrix.yaml"],
        check=True, capture_output=True, text=True,
    ).stdout.split()  # fmt: skip
    experiments = mx.load_matrix()["experiments"]
    expected = [f"{e['target']}:{k}:{e['workload']}" for k, e in experiments.items()]
    assert out == expected and len(out) == 26  # V1-V11, L1-L9, O1-O4, N1-N2


def test_every_matrix_target_loads_an_artifact_that_draws_a_figure_when_it_is_a_fig():
    """Every target of the matrix is implemented: every artifact of the papers, fig-optimized
    (ours, beyond them) and table-noise (the verdicts' noise floor)."""
    for t in driver.targets():
        art = driver.load(t)
        assert isinstance(art, driver.Artifact), t
        assert (art.figure is not None) == t.startswith("fig-"), t


def test_a_module_without_its_artifact_or_with_a_figure_it_should_not_have_is_refused(
    monkeypatch,
):
    import analysis.artifacts.table_noise as mod

    monkeypatch.setattr(mod, "ARTIFACT", replace(mod.ARTIFACT, figure=lambda t, meta: None))
    with pytest.raises(AnalysisError, match="a fig-\\* target draws a figure"):
        driver.load("table-noise")
    monkeypatch.delattr(mod, "ARTIFACT")
    with pytest.raises(AnalysisError, match="has no ARTIFACT"):
        driver.load("table-noise")


def test_make_help_lists_every_target_from_the_matrix():
    out = subprocess.run(["make", "help"], check=True, capture_output=True, text=True).stdout
    for t in driver.targets():
        assert f"  {t} " in out
    assert "One target per artifact (experiments/matrix.yaml):" in out  # none left unbuilt


def test_make_keeps_a_pythonpath_it_is_given(tmp_path):
    # `make gpu-check PY=python3` on the H200 with wheels carried on PYTHONPATH: the Makefile's
    # own PYTHONPATH replaced it, and every LLM check failed "No module named 'torchtune'"
    show = ["make", "-s", "--eval", "show-pythonpath: ; @echo $$PYTHONPATH", "show-pythonpath"]
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    got = subprocess.run(show, check=True, capture_output=True, text=True, env=env).stdout
    assert got.split() == [f"{Path.cwd()}:{tmp_path}"]
    env.pop("PYTHONPATH")
    got = subprocess.run(show, check=True, capture_output=True, text=True, env=env).stdout
    assert got.split() == [str(Path.cwd())]
