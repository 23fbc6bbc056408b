"""Make knows what is done: once an artifact's sweeps, table, figure and report are newer than
what they are made from, and run/sweep/left.py finds nothing left of its sweeps, `make -q
<target>` exits 0 and `make -n` has nothing to do; a newer run source, the matrix or another
PROFILER/REPEATS makes its sweeps re-check. A finished `make all` is a no-op make -q agrees with.

The files of one artifact are fabricated in a temporary results folder (tests/made_runs.py: the
records and run folders its sweeps would leave) with explicit times, in the order make would write
them; a changed source is make's own --what-if (no file of the checkout is touched); nothing is
run but make -q and make -n. tests/test_make_truth.py walks the same on real smoke runs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from run import settings, store

sys.path.insert(0, str(Path(__file__).parent))
from made_runs import fabricate  # noqa: E402
from test_settings import BAD  # noqa: E402

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


def fake_venv(tmp: Path) -> None:
    """A venv stamp of this test's own, whose Python (which checks the settings and asks
    run/sweep/left.py what is left) is the one running the tests."""
    venv_stamp = Path(variable(tmp, "VENV_STAMP", "PROFILE=smoke"))
    venv_stamp.parent.mkdir(parents=True)
    venv_stamp.touch()
    python = venv_stamp.parent / "bin" / "python"
    python.parent.mkdir(parents=True, exist_ok=True)
    python.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    python.chmod(0o755)


def made_target(tmp: Path) -> dict[str, Any]:
    """The files of a made TARGET under tmp, each newer than what it is made from."""
    smoke = ["PROFILE=smoke"]
    fake_venv(tmp)
    res = tmp / "results" / "smoke"
    out = Path(variable(tmp, "REPORT_OUT", *smoke))
    assert out == res / "report"  # a results folder elsewhere keeps its report beside it
    # later than any source, even one edited while the test runs (make warns of the future times)
    base = max(time.time(), newest_source()) + 600
    files = {
        1: fabricate(tmp / "results", "smoke", list(SWEEPS)),
        2: [res / "tables" / f"{TARGET}.csv", res / "tables" / f"{TARGET}.json",
            res / "tables" / "fig-loss.json"],  # another target's table, made earlier
        3: [out / "figures" / f"{TARGET}.png"],
        4: [out / "report.md", out / "report.tex"],
    }  # fmt: skip
    for step, paths in files.items():
        for p in paths:
            p.parent.mkdir(parents=True, exist_ok=True)
            if step > 1:
                p.write_text("{}")
            os.utime(p, (base + step, base + step))
    return {"base": base, "png": files[3][0].relative_to(tmp),
            "other": files[2][2].relative_to(tmp), "report": files[4][0].relative_to(tmp)}  # fmt: skip


def copy_of(template: Path, tmp: Path) -> None:
    """A template's files in tmp with their times (the venv stamp, the runs, the outputs)."""
    shutil.copytree(template, tmp, dirs_exist_ok=True, symlinks=True)


@pytest.fixture(scope="module")
def done_template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """made_target once per module; each test gets a copy of its own (`done`)."""
    tmp = tmp_path_factory.mktemp("done")
    with pytest.MonkeyPatch.context() as mp:
        for var in ("PROFILER", "REPEATS"):  # as make() runs it
            mp.delenv(var, raising=False)
        return tmp, made_target(tmp)


@pytest.fixture
def done(done_template, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The files of a made TARGET, each newer than what it is made from (a copy of the module's)."""
    for var in ("PROFILER", "REPEATS"):  # as make() runs it
        monkeypatch.delenv(var, raising=False)
    template, made = done_template
    copy_of(template, tmp_path)
    return {"tmp": tmp_path, "res": tmp_path / "results" / "smoke", "base": made["base"],
            **{k: tmp_path / made[k] for k in ("png", "other", "report")}}  # fmt: skip


def sweeps_run(out: str) -> list[str]:
    return [e for e in SWEEPS if f"-m run.sweep --scale smoke --exp {e}" in out]


def test_a_made_artifact_is_up_to_date(done):
    tmp = done["tmp"]
    assert make(tmp, "-q", TARGET, "PROFILE=smoke").returncode == 0
    dry = make(tmp, "-n", TARGET, "PROFILE=smoke")
    assert dry.returncode == 0 and f"Nothing to be done for '{TARGET}'" in dry.stdout
    assert make(tmp, "-q", TARGET, "PROFILE=smoke", "REPEATS=1", "PROFILER=").returncode == 0


# REPEATS=2 adds a repeat to L8's cells; N1 and N2 run theirs 3 times already (their own
# `repeats`): their runs stay the same. PROFILER=torch renames every run.
@pytest.mark.parametrize(("setting", "renamed"), [("REPEATS=2", ["L8"]),
                                                  ("PROFILER=torch", list(SWEEPS))])  # fmt: skip
def test_a_setting_that_changes_runs_makes_the_sweeps_recheck(done, setting, renamed):
    tmp = done["tmp"]
    listing = sorted(p.relative_to(tmp) for p in tmp.rglob("*"))
    assert make(tmp, "-q", TARGET, "PROFILE=smoke", setting).returncode == 1
    dry = make(tmp, "-n", TARGET, "PROFILE=smoke", setting).stdout
    assert sweeps_run(dry) == renamed
    # -n and -q write nothing, and the runs of the default settings are still what is done
    assert sorted(p.relative_to(tmp) for p in tmp.rglob("*")) == listing
    assert make(tmp, "-q", TARGET, "PROFILE=smoke").returncode == 0


@pytest.mark.parametrize("change", ["run folder", "summary", "record", "record unreadable"])
def test_a_run_or_record_gone_makes_its_sweep_run_whatever_the_file_times(done, change):
    """Deleted or corrupted under a newer record, table and report: only file times, make would
    find nothing to do while `make plan` lists the run as missing."""
    tmp, res = done["tmp"], done["res"]
    record = res / "sweeps" / "L8.json"
    run = res / "runs" / store.read_json(record)["runs"][0]["run"]
    if change == "run folder":
        for f in run.iterdir():
            f.unlink()
        run.rmdir()
    elif change == "summary":
        (run / store.SUMMARY).write_text('{"status": "o')
    elif change == "record":
        record.unlink()
    else:
        record.write_text("[]")
    os.utime(done["report"], (done["base"] + 9, done["base"] + 9))  # newest of all
    assert make(tmp, "-q", TARGET, "PROFILE=smoke").returncode == 1
    dry = make(tmp, "-n", TARGET, "PROFILE=smoke").stdout
    assert sweeps_run(dry) == ["L8"]  # N1 and N2 are whole
    assert f"-m analysis {TARGET}" in dry and "-m report.build" in dry


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
        assert "-m report.build --scale smoke" in dry
        # nothing else: fig-loss's table is read as it is, its sweep (V7) is not re-checked
        assert sweeps_run(dry) == [] and "-m analysis" not in dry and "--exp V7" not in dry
        os.utime(done["report"], (base + step + 1, base + step + 1))
        assert make(tmp, "-q", TARGET, "PROFILE=smoke").returncode == 0
    assert make(tmp, "-q", "-W", "report/templates/report.md.j2", TARGET,
                "PROFILE=smoke").returncode == 1  # fmt: skip


def test_make_n_and_a_bad_profile_create_nothing(tmp_path):
    # no venv yet: every sweep of the target is left, and nothing is asked or written
    dry = make(tmp_path, "-n", TARGET, "PROFILE=smoke")
    assert dry.returncode == 0 and sweeps_run(dry.stdout) == list(SWEEPS)
    for goal in (TARGET, "help"):
        bad = make(tmp_path, "-n", goal, "PROFILE=bogus")
        assert bad.returncode == 2 and bad.stdout == ""
        [line] = bad.stderr.splitlines()
        assert "PROFILE must be a scale of" in line and "got 'bogus'" in line
    assert not (tmp_path / "results").exists() and not (tmp_path / "venv").exists()


@pytest.mark.parametrize("results", ["results", "./results", "REPO/results", "TMP/elsewhere",
                                     "results/reference/h100"])  # fmt: skip
def test_the_makefile_and_python_put_the_report_in_the_same_place(tmp_path, monkeypatch, results):
    results = results.replace("REPO", str(REPO)).replace("TMP", str(tmp_path))
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("RESULTS_DIR", str(Path(results)))
    got = {n: REPO / variable(tmp_path, n, "PROFILE=quick", results=results)
           for n in ("REPORT_OUT", "FIGS")}  # fmt: skip
    assert got["REPORT_OUT"] == (REPO / store.report_dir("quick")).resolve()
    assert got["FIGS"] == (REPO / store.figures_dir("quick")).resolve()
    default = results in ("results", "./results", f"{REPO}/results")
    assert (got["REPORT_OUT"] == REPO / "report" / "out" / "quick") == default


# --- every setting checked on every call (run/settings.py, when make starts) ----------------------


def listing(tmp: Path) -> list[tuple[str, int]]:
    return sorted((str(p.relative_to(tmp)), p.stat().st_mtime_ns) for p in tmp.rglob("*"))


def refused(done: subprocess.CompletedProcess, name: str) -> bool:
    """Exit 2, nothing on stdout, one line on stderr that names the setting."""
    lines = done.stderr.splitlines()
    one_line = (done.returncode, done.stdout, len(lines)) == (2, "", 1)
    return one_line and f" {name} must be " in lines[0]


def test_every_bad_setting_is_refused_by_make_on_a_done_target_writing_nothing(done):
    tmp = done["tmp"]
    before = listing(tmp)
    bad = {s.name: BAD[s.kind][0] for s in settings.SETTINGS if BAD[s.kind]}
    assert {"RUN_TIMEOUT_S", "HEARTBEAT_S", "LOCK_STALE_S", "PROFILE"} <= set(bad)
    for name, value in [*bad.items(), ("RUN_TIMEOUT_S", "-1")]:
        out = make(tmp, TARGET, "PROFILE=smoke", f"{name}={value}")
        assert refused(out, name), (name, value, out.stdout, out.stderr)
    assert listing(tmp) == before
    assert make(tmp, "-q", TARGET, "PROFILE=smoke").returncode == 0


@pytest.mark.parametrize("setting", ["RUN_TIMEOUT_S=abc", "HEARTBEAT_S=abc", "LOCK_STALE_S=abc",
                                     "RUN_TIMEOUT_S=-1"])  # fmt: skip
def test_a_bad_setting_is_refused_whether_or_not_work_is_left(done, setting):
    tmp, name = done["tmp"], setting.split("=")[0]
    (done["res"] / "sweeps" / "L8.json").unlink()  # L8's sweep is left
    before = listing(tmp)
    for goal in (TARGET, "all", "help", "plan"):
        assert refused(make(tmp, goal, "PROFILE=smoke", setting), name), goal
    # in the environment as on the command line
    env = {**os.environ, name: setting.split("=", 1)[1]}
    out = subprocess.run(["make", "--no-print-directory", f"RESULTS_DIR={tmp / 'results'}",
                          f"VENV={tmp / 'venv'}", TARGET], cwd=REPO, env=env, capture_output=True,
                         text=True, timeout=60)  # fmt: skip
    assert refused(out, name)
    assert listing(tmp) == before


def test_profile_is_checked_before_the_venv_exists_without_pyyaml(tmp_path):
    """make checks the settings with python3 before `make venv`: PROFILE against the matrix's
    scales even where that Python has no PyYAML."""
    code = "import sys; sys.modules['yaml'] = None; from run import settings; sys.exit(settings.main(['--check']))"  # noqa: E501
    env = {k: v for k, v in os.environ.items() if k not in [s.name for s in settings.SETTINGS]}
    for value, rc in (("smoke", 0), ("paper", 0), ("bogus", 2)):
        out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env={**env, "PROFILE": value},
                             capture_output=True, text=True)  # fmt: skip
        assert out.returncode == rc, out.stderr
    assert out.stderr.strip().endswith("smoke, quick, paper, got 'bogus'")


# --- make all: nothing to do once everything is made; the CUDA check and the plan come first ------


@pytest.fixture(scope="module")
def all_done_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every sweep, table, figure and the report of `make all`, each newer than its sources."""
    tmp = tmp_path_factory.mktemp("all_done")
    with pytest.MonkeyPatch.context() as mp:
        for var in ("PROFILER", "REPEATS"):
            mp.delenv(var, raising=False)
        fake_venv(tmp)
        smoke = ["PROFILE=smoke"]
        exps = variable(tmp, "foreach t,$(ARTIFACTS),$(exp_$(t))", *smoke).split()
        outputs = variable(tmp, "call outputs,$(ARTIFACTS)", *smoke).split()
        report = Path(variable(tmp, "REPORT_MD", *smoke))
        base = max(time.time(), newest_source()) + 600
        made = fabricate(tmp / "results", "smoke", sorted(set(exps)))
        # the noise repeats' stamps, as `make all` leaves them (Makefile: spread)
        for k in (0, 1):
            made.append(tmp / variable(tmp, "SWEEPS", *smoke) / f".noise-{k}")
            made[-1].touch()
        for step, paths in enumerate((made, [Path(p) for p in outputs], [report]), start=1):
            for p in paths:
                p.parent.mkdir(parents=True, exist_ok=True)
                if step > 1:
                    p.write_text("{}")
                os.utime(p, (base + step, base + step))
    return tmp


@pytest.fixture
def all_done(all_done_template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the module's finished `make all`, for one test to change."""
    for var in ("PROFILER", "REPEATS"):
        monkeypatch.delenv(var, raising=False)
    copy_of(all_done_template, tmp_path)
    return tmp_path


def test_a_finished_make_all_has_nothing_to_do(all_done):
    assert make(all_done, "-q", "all", "PROFILE=smoke").returncode == 0
    dry = make(all_done, "-n", "all", "PROFILE=smoke")
    assert dry.returncode == 0 and "Nothing to be done for 'all'" in dry.stdout


def test_with_a_run_left_make_all_checks_cuda_and_prints_the_plan_before_any_sweep(all_done):
    res = all_done / "results" / "smoke"
    run = res / "runs" / store.read_json(res / "sweeps" / "V3.json")["runs"][0]["run"]
    (run / store.SUMMARY).unlink()
    assert make(all_done, "-q", "all", "PROFILE=smoke").returncode == 1
    lines = make(all_done, "-n", "all", "PROFILE=smoke").stdout.splitlines()
    cmds = [ln for ln in lines if " -m " in ln]
    assert cmds[0].endswith("-m run.node.probe --check-cuda")
    assert cmds[1].endswith("-m run.sweep.plan --scale smoke --brief")
    # then V3's sweep (V3 only: every other record and run is whole), its tables, the report
    assert [c for c in cmds if "-m run.sweep " in c] == [
        f"{Path(variable(all_done, 'PY'))} -m run.sweep --scale smoke --exp V3"
    ]
