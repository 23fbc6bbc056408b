"""Every setting is declared once (run/settings.py) and checked at the start of every program: a
bad value is one line naming the variable and what it accepts, exit status 2, nothing created."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from run import settings
from run.settings import SETTINGS, SettingError
from run.sweep import matrix as mx

REPO = Path(__file__).resolve().parent.parent
# Values each kind refuses; path, text and secret settings take any text (their use says more).
BAD = {
    "whole": ["abc", "1.5", "1e3"],
    "number": ["abc", "0", "-1", "nan", "inf"],
    "choice": ["maybe"],
    "scale": ["bogus"],
    "file": ["/no/such/matrix.yaml"],
    "url": ["huggingface.co", "ftp://mirror"],
    "index": ["cu126"],
    "path": [],
    "text": [],
    "secret": [],
}


def bad_values(s: settings.Setting) -> list[str]:
    return BAD[s.kind] + ([str(s.low - 1)] if s.kind == "whole" else [])


def good_value(s: settings.Setting, tmp_path: Path) -> tuple[str, object]:
    """A value the setting accepts, and what value() makes of it."""
    if s.kind == "whole":
        return f" {s.low + 2} ", s.low + 2
    if s.kind == "number":
        return "2.5", 2.5
    if s.kind in ("choice", "scale"):
        first = s.choices[0] if s.choices else "smoke"
        return first, first
    if s.kind == "file":
        path = tmp_path / "some.yaml"
        path.write_text("scales: {smoke: {}}\n")
        return str(path), path
    if s.kind == "path":
        return "/somewhere/else", Path("/somewhere/else")
    if s.kind in ("url", "index"):
        return "https://mirror.example/simple", "https://mirror.example/simple"
    return "some text", "some text"


@pytest.fixture
def unset(monkeypatch):
    """No declared setting in the environment: every one is at its default."""
    for s in SETTINGS:
        monkeypatch.delenv(s.name, raising=False)
    return monkeypatch


def clean_env(**given: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in settings.BY_NAME}
    return {**env, "PYTHONPATH": str(REPO), **given}


def test_every_setting_refuses_each_bad_value_in_one_line_naming_it(unset, tmp_path):
    checked = refusing = 0
    for s in SETTINGS:
        for raw in bad_values(s):
            unset.setenv(s.name, raw)
            with pytest.raises(SettingError) as err:
                settings.value(s.name)
            line = str(err.value)
            assert line.startswith(f"{s.name} must be "), line
            assert "\n" not in line and line.endswith(f"got {raw!r}")
            with pytest.raises(SettingError, match=f"^{s.name} must be "):
                settings.check_all()
        refusing += bool(bad_values(s))
        raw, typed = good_value(s, tmp_path)
        unset.setenv(s.name, raw)
        assert settings.value(s.name) == typed
        unset.setenv(s.name, "  ")  # empty (`make X=`) is the default
        assert settings.value(s.name) == s.default
        unset.delenv(s.name)
        checked += 1
    assert checked == len(SETTINGS) == len(settings.BY_NAME)
    free = {s.name for s in SETTINGS if not bad_values(s)}
    assert {settings.BY_NAME[n].kind for n in free} <= {"path", "text", "secret"}
    # a new setting: say here which kind it is (SBATCH_OPTS is free text)
    assert (refusing, len(free)) == (13, 23)


def test_check_all_counts_every_declared_setting(unset, tmp_path):
    for s in SETTINGS:
        unset.setenv(s.name, good_value(s, tmp_path)[0])
    unset.setenv("MATRIX_FILE", str(mx.matrix_file()))  # PROFILE=smoke is checked against it
    assert settings.check_all() == len(SETTINGS) > 30
    assert settings.check_all(["NUMA", "REPEATS"]) == 2
    with pytest.raises(KeyError):
        settings.value("NOT_A_SETTING")


@pytest.mark.parametrize(
    "name, raw",
    [("RUN_TIMEOUT_S", "abc"), ("RUN_TIMEOUT_S", "-1"), ("HEARTBEAT_S", "abc"),
     ("LOCK_STALE_S", "abc"), ("NUMA", "maybe"), ("PROFILE", "bogus")],
)  # fmt: skip
def test_the_check_command_is_one_line_and_exit_2(name, raw):
    proc = subprocess.run(
        [sys.executable, "-m", "run.settings", "--check"],
        cwd=REPO, env=clean_env(**{name: raw}), capture_output=True, text=True,
    )  # fmt: skip
    assert (proc.returncode, proc.stdout) == (2, "")
    [line] = proc.stderr.splitlines()
    assert line.startswith(f"error: {name} must be ") and line.endswith(f"got {raw!r}")


def test_the_check_command_says_nothing_when_every_value_is_good():
    proc = subprocess.run(
        [sys.executable, "-m", "run.settings", "--check"],
        cwd=REPO, env=clean_env(NUMA="off", REPEATS="2", PROFILE="smoke"),
        capture_output=True, text=True,
    )  # fmt: skip
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")


def test_the_messages_of_the_old_readers_stay(unset):
    unset.setenv("RUN_TIMEOUT_S", "abc")
    with pytest.raises(SettingError) as err:
        settings.value("RUN_TIMEOUT_S")
    assert str(err.value) == (
        "RUN_TIMEOUT_S must be a whole number >= 0 (seconds; 0 = no limit), got 'abc'"
    )
    unset.setenv("REPEATS", "0")
    with pytest.raises(mx.MatrixError, match="^REPEATS must be a whole number >= 1, got '0'$"):
        mx.repeats()
    unset.setenv("PROFILER", "perf")
    with pytest.raises(mx.MatrixError, match="^PROFILER must be one of auto, torch, nsys, none"):
        mx.profiler_override()
    unset.setenv("HEARTBEAT_S", "inf")
    with pytest.raises(SettingError):
        settings.value("HEARTBEAT_S")
    assert math.isfinite(settings.BY_NAME["HEARTBEAT_S"].default)


def test_the_declarations_agree_with_the_code_they_describe():
    # PROFILE's words name the real matrix's scales
    scales = list(mx.load_matrix(settings.BY_NAME["MATRIX_FILE"].default)["scales"])
    assert f"({', '.join(scales)})" in settings.BY_NAME["PROFILE"].accepts
    for s in SETTINGS:
        if s.kind == "whole":
            assert f">= {s.low}" in s.accepts, s.name
        if s.kind == "choice":
            assert s.accepts == f"one of {', '.join(s.choices)}", s.name


def test_the_readme_table_is_the_declared_one():
    text = (REPO / "README.md").read_text()
    begin, end = "<!-- settings:begin -->\n", "<!-- settings:end -->"
    assert text.count(begin) == text.count(end) == 1
    table = text.split(begin, 1)[1].split(end, 1)[0]
    assert table == settings.markdown_table(), "paste `python -m run.settings --markdown` there"
    assert table.count("\n| `") == len(SETTINGS)


def test_a_plan_with_a_bad_setting_is_one_line_and_creates_nothing(tmp_path):
    results = tmp_path / "results"
    proc = subprocess.run(
        [sys.executable, "-m", "run.sweep.plan", "--scale", "smoke"],
        cwd=REPO, env=clean_env(NUMA="maybe", RESULTS_DIR=str(results)),
        capture_output=True, text=True,
    )  # fmt: skip
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == "error: NUMA must be one of auto, bind, off, got 'maybe'\n"
    assert not results.exists()


def test_no_module_reads_a_setting_when_imported():
    bad = {name: "abc" for name in ("RUN_TIMEOUT_S", "HEARTBEAT_S", "LOCK_STALE_S", "LOCK_POLL_S",
                                    "NUMA", "REPEATS", "CPU_THREADS_PER_RANK", "PROFILER")}  # fmt: skip
    bad |= {"MATRIX_FILE": "/nonexistent/matrix.yaml", "RESULTS_DIR": "/nonexistent/results"}
    code = ("import run.sweep.runner, run.sweep.lock, run.sweep.plan, run.node.threads, "
            "run.store, run.sweep.matrix")  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=clean_env(**bad), capture_output=True,
        text=True,
    )  # fmt: skip
    assert (proc.returncode, proc.stderr) == (0, "")


def test_the_results_folder_and_the_matrix_are_read_when_asked(monkeypatch, tmp_path):
    from run import store

    monkeypatch.setenv("RESULTS_DIR", str(tmp_path / "a"))
    assert store.runs_dir("smoke") == tmp_path / "a" / "smoke" / "runs"
    monkeypatch.setenv("RESULTS_DIR", str(tmp_path / "b"))
    assert store.runs_dir("smoke") == tmp_path / "b" / "smoke" / "runs"
    monkeypatch.setenv("MATRIX_FILE", str(tmp_path / "m.yaml"))
    assert mx.matrix_file() == tmp_path / "m.yaml"


def test_only_run_settings_reads_the_environment():
    """A setting (or a value the launcher, the scheduler or the image gives) is read through
    run/settings.py alone; writes, and copies of the environment for a child, are free."""
    import ast

    names = {s.name for s in SETTINGS} | set(settings.HOST_GIVEN)
    found = []
    for path in sorted(
        p for pkg in ("run", "analysis", "report") for p in (REPO / pkg).rglob("*.py")
    ):
        if path == REPO / "run" / "settings.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            key = None
            if isinstance(node, ast.Call) and node.args:
                f = ast.unparse(node.func)
                if f in ("os.environ.get", "environ.get", "os.getenv", "getenv"):
                    key = node.args[0]
            elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
                if ast.unparse(node.value) in ("os.environ", "environ"):
                    key = node.slice
            if isinstance(key, ast.Constant) and key.value in names:
                found.append(f"{path.relative_to(REPO)}:{node.lineno} {key.value}")
    assert found == []
