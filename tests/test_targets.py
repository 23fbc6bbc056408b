"""The target -> experiment map lives only in experiments/matrix.yaml: the Makefile reads it with
experiments/targets.awk, which must agree with run/sweep/matrix.py's own parse."""

from __future__ import annotations

import subprocess

from analysis import driver
from run.sweep import matrix as mx


def test_awk_reads_the_same_targets_as_python():
    out = subprocess.run(
        ["awk", "-f", "experiments/targets.awk", "experiments/matrix.yaml"],
        check=True, capture_output=True, text=True,
    ).stdout.split()  # fmt: skip
    experiments = mx.load_matrix()["experiments"]
    expected = [f"{e['target']}:{k}:{e['workload']}" for k, e in experiments.items()]
    assert out == expected and len(out) == 26  # V1-V11, L1-L9, O1-O4, N1-N2


def test_every_matrix_target_is_an_artifact_module_or_listed_as_not_implemented():
    implemented = [t for t in driver.targets() if driver.artifact(t) is not None]
    missing = sorted(set(driver.targets()) - set(implemented))
    # every artifact of the papers, fig-optimized (ours, beyond them) and table-noise (the
    # verdicts' noise floor)
    assert missing == [] and len(implemented) == 22
    assert {"fig-optimized", "table-noise"} <= set(implemented)


def test_make_help_lists_every_target_from_the_matrix():
    out = subprocess.run(["make", "help"], check=True, capture_output=True, text=True).stdout
    for t in driver.targets():
        assert f"  {t} " in out
    assert "One target per artifact (experiments/matrix.yaml):" in out  # none left unbuilt
