"""Every `python -m` program of run/, analysis/ and report/ checks the settings before anything
else (run/program.py): one bad value is its one `error:` line, exit status 2, nothing written.
The programs are found in the tree, not listed here, and the Makefile runs none that escapes."""

from __future__ import annotations

import os
import re
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

from run import settings

REPO = Path(__file__).resolve().parent.parent
BAD = {"HEARTBEAT_S": "abc"}
LINE = "error: HEARTBEAT_S must be a number > 0 (seconds), got 'abc'\n"
GUARD = re.compile(r'^if __name__ == "__main__":', re.MULTILINE)


def programs() -> list[str]:
    """What `python -m` runs: every package with a __main__.py, and every other module with a
    `__main__` guard (or no guard at all: __main__.py itself)."""
    found = []
    for path in sorted(
        p for pkg in ("run", "analysis", "report") for p in (REPO / pkg).rglob("*.py")
    ):
        parts = path.relative_to(REPO).with_suffix("").parts
        if path.name == "__main__.py":
            found.append(".".join(parts[:-1]))
        elif GUARD.search(path.read_text()):
            found.append(".".join(parts))
    return found


@pytest.fixture
def bare(tmp_path, monkeypatch):
    """A folder to start in, with every setting unset but the bad one (RESULTS_DIR in it)."""
    for s in settings.SETTINGS:
        monkeypatch.delenv(s.name, raising=False)
    for name, raw in BAD.items():
        monkeypatch.setenv(name, raw)
    monkeypatch.setenv("RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("name", programs())
@pytest.mark.filterwarnings(
    "ignore:.*found in sys.modules:RuntimeWarning"
)  # runpy: imported already
def test_a_bad_setting_is_one_line_exit_2_and_nothing_written(name, bare, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", [name])
    # run.vision leaves with os._exit (its __main__.py): here that would end pytest
    monkeypatch.setattr(os, "_exit", sys.exit)
    with pytest.raises(SystemExit) as ended:
        runpy.run_module(name, run_name="__main__", alter_sys=True)
    out, err = capsys.readouterr()
    assert (ended.value.code, out, err) == (2, "", LINE)
    assert list(bare.iterdir()) == []


def test_the_real_m_path_too(bare):
    """One program started as make starts it: a process of its own."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "run.sweep", "--scale", "smoke", "--exp", "V1"],
                          cwd=bare, env=env, capture_output=True, text=True)  # fmt: skip
    assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", LINE)
    assert list(bare.iterdir()) == []


def test_the_makefile_runs_only_programs_found_here():
    found = set(programs())
    named = re.findall(r" -m ((?:run|analysis|report)\.?[\w.]*)", (REPO / "Makefile").read_text())
    assert len(set(named)) > 15, "the Makefile's `-m` calls are not seen"
    for name in set(named):
        if name.endswith("."):  # a module named by a pattern rule (`pkg.$(subst -,_,$*)`)
            assert any(p.startswith(name) for p in found), name
        else:
            assert name in found, f"make runs `-m {name}`, which no test here runs"
    assert {"run.vision", "run.llm.tune", "analysis.profiles.cli"} <= found  # not run by make
