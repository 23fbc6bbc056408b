"""Make knows what is done: once an artifact's sweeps, table, figure and report are newer than
what they are made from, `make -q <target>` exits 0 and `make -n` has nothing to do; a newer run
source, the matrix or another PROFILER/REPEATS makes its sweep re-check.

Works on file times alone: the files of one artifact are fabricated in a temporary results folder
with explicit times, in the order make would write them; a changed source is make's own
--what-if (no file of the checkout is touched); nothing is run but make -q, make -n and the rule
that writes the PROFILER/REPEATS stamp.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from report.figures import common as figcommon
from run import store
from run.sweep import matrix as mx

REPO = Path(__file__).resolve().parents[1]
TARGET = "fig-vram"  # one experiment (L8), beside the noise cells every table reads (N1, N2)
SWEEPS = ("L8", "N1", "N2")
SOURCES = ("run", "analysis", "report", "experiments", "configs", "reference")


def make(tmp: Path, *args: str, results: str | None = None) -> subprocess.CompletedProcess:
    """make in the checkout, on the results in tmp, with a venv stamp of its own (the checkout's
    venv is not what is tested) and no PROFILER/REPEATS but those passed."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PROFILER", "REPEATS", "MAKEFLAGS", "MFLAGS", "MAKELEVEL")}  # fmt: skip
    cmd = ["make", "--no-print-directory", f"RESULTS_DIR={results or tmp / 'results'}",
           f"VENV={tmp / 'venv'}", *args]  # fmt: skip
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=60)


def variable(tmp: Path, name: str, *args: str, results: str | None = None) -> str:
    """A variable of the Makefile as make computes it."""
    show = f"show-variable: ; @echo '$({name})'"
    out = make(tmp, f"--eval={show}", *args, "show-variable", results=results)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def newest_source() -> float:
    return max(
        p.stat().st_mtime for d in SOURCES for p in (REPO / d).rglob("*") if p.is_file()
    )  # fmt: skip


@pytest.fixture
def done(tmp_path: Path) -> dict[str, Any]:
    """The files of a made TARGET, each newer than what it is made from."""
    smoke = ["PROFILE=smoke"]
    venv_stamp = Path(variable(tmp_path, "VENV_STAMP", *smoke))
    venv_stamp.parent.mkdir(parents=True)
    venv_stamp.touch()
    # the stamp's rule checks the settings with the venv's Python: this test's venv hands over
    python = venv_stamp.parent / "bin" / "python"
    python.parent.mkdir(parents=True, exist_ok=True)
    python.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    python.chmod(0o755)
    res = tmp_path / "results" / "smoke"
    made = make(tmp_path, *smoke, str(res / ".profiler"))  # the stamp, by its own rule
    assert made.returncode == 0, made.stderr
    out = Path(variable(tmp_path, "REPORT_OUT", *smoke))
    assert out == res / "report"  # a results folder elsewhere keeps its report beside it
    # later than any source, even one edited while the test runs (make warns of the future times)
    base = max(time.time(), newest_source()) + 600
    files = {
        1: [res / "sweeps" / f"{e}.json" for e in SWEEPS],
        2: [res / "tables" / f"{TARGET}.csv", res / "tables" / f"{TARGET}.json",
            res / "tables" / "fig-loss.json"],  # another target's table, made earlier
        3: [out / "figures" / f"{TARGET}.png"],
        4: [out / "report.md", out / "report.tex"],
    }  # fmt: skip
    for step, paths in files.items():
        for p in paths:
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text("{}")
            os.utime(p, (base + step, base + step))
    return {"tmp": tmp_path, "stamp": res / ".profiler", "base": base, "png": files[3][0],
            "other": files[2][2], "report": files[4][0]}  # fmt: skip


def sweeps_run(out: str) -> list[str]:
    return [e for e in SWEEPS if f"-m run.sweep --profile smoke --exp {e}" in out]


def test_a_made_artifact_is_up_to_date(done):
    tmp = done["tmp"]
    stamp = done["stamp"].stat()
    assert make(tmp, "-q", TARGET, "PROFILE=smoke").returncode == 0
    dry = make(tmp, "-n", TARGET, "PROFILE=smoke")
    assert dry.returncode == 0 and f"Nothing to be done for '{TARGET}'" in dry.stdout
    assert make(tmp, "-q", TARGET, "PROFILE=smoke", "REPEATS=1", "PROFILER=").returncode == 0
    # the same settings leave the stamp as it was: neither its content nor its time changes
    assert done["stamp"].read_text() == "profiler= repeats=1\n"
    assert done["stamp"].stat().st_mtime_ns == stamp.st_mtime_ns


@pytest.mark.parametrize("setting", ["REPEATS=2", "PROFILER=torch"])
def test_a_setting_that_changes_runs_makes_the_sweeps_recheck(done, setting):
    tmp, before = done["tmp"], done["stamp"].read_text()
    assert make(tmp, "-q", TARGET, "PROFILE=smoke", setting).returncode == 1
    dry = make(tmp, "-n", TARGET, "PROFILE=smoke", setting).stdout
    assert sweeps_run(dry) == list(SWEEPS)
    name, value = setting.lower().split("=")
    assert f"{name}={value}" in dry  # the stamp would be rewritten
    # -n and -q write nothing: the settings of the last real make still hold
    assert done["stamp"].read_text() == before
    assert make(tmp, "-q", TARGET, "PROFILE=smoke").returncode == 0


@pytest.mark.parametrize(
    ("source", "rechecked"),
    [("run/llm/launch.py", SWEEPS), ("run/store.py", SWEEPS),
     ("experiments/matrix.yaml", SWEEPS), ("run/bench/optimize.py", ())],
)  # fmt: skip
def test_a_newer_run_source_or_matrix_makes_the_sweeps_recheck(done, source, rechecked):
    assert (REPO / source).is_file()
    tmp = done["tmp"]
    dry = make(tmp, "-n", f"--what-if={source}", TARGET, "PROFILE=smoke").stdout
    assert sweeps_run(dry) == list(rechecked)
    assert make(tmp, "-q", f"--what-if={source}", TARGET, "PROFILE=smoke").returncode == (
        1 if rechecked else 0
    )


def test_the_report_is_remade_from_a_newer_figure_or_table_alone(done):
    tmp, base = done["tmp"], done["base"]
    for step, newer in ((5, done["png"]), (7, done["other"])):
        os.utime(newer, (base + step, base + step))
        dry = make(tmp, "-n", TARGET, "PROFILE=smoke").stdout
        assert "-m report.build --profile smoke" in dry
        # nothing else: fig-loss's table is read as it is, its sweep (V7) is not re-checked
        assert sweeps_run(dry) == [] and "-m analysis" not in dry and "--exp V7" not in dry
        os.utime(done["report"], (base + step + 1, base + step + 1))
        assert make(tmp, "-q", TARGET, "PROFILE=smoke").returncode == 0
    assert make(tmp, "-q", "-W", "report/templates/report.md.j2", TARGET,
                "PROFILE=smoke").returncode == 1  # fmt: skip


def test_make_n_and_a_bad_profile_create_nothing(tmp_path):
    assert make(tmp_path, "-n", TARGET, "PROFILE=smoke").returncode == 0
    bad = make(tmp_path, "-n", TARGET, "PROFILE=bogus")
    assert "-m run.sweep --profile bogus" in bad.stdout and ".profiler" not in bad.stdout
    assert make(tmp_path, "help", "PROFILE=bogus").returncode == 0
    assert not (tmp_path / "results").exists()


def test_awk_reads_the_profiles_of_the_matrix():
    out = subprocess.run(
        ["awk", "-v", "profiles=1", "-f", "experiments/targets.awk", "experiments/matrix.yaml"],
        cwd=REPO, check=True, capture_output=True, text=True,
    ).stdout.split()  # fmt: skip
    assert out == mx.profiles() and "smoke" in out


@pytest.mark.parametrize("results", ["results", "./results", "REPO/results", "TMP/elsewhere",
                                     "results/reference/h100"])  # fmt: skip
def test_the_makefile_and_python_put_the_report_in_the_same_place(tmp_path, monkeypatch, results):
    results = results.replace("REPO", str(REPO)).replace("TMP", str(tmp_path))
    monkeypatch.chdir(REPO)
    monkeypatch.setattr(store, "RESULTS_ROOT", Path(results))
    got = {n: REPO / variable(tmp_path, n, "PROFILE=quick", results=results)
           for n in ("REPORT_OUT", "FIGS")}  # fmt: skip
    assert got["REPORT_OUT"] == (REPO / figcommon.report_dir("quick")).resolve()
    assert got["FIGS"] == (REPO / figcommon.figures_dir("quick")).resolve()
    default = results in ("results", "./results", f"{REPO}/results")
    assert (got["REPORT_OUT"] == REPO / "report" / "out" / "quick") == default
