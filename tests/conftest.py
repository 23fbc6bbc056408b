"""Shared fixtures. Tests never touch the network or the real results folder."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from run.sweep import matrix as mx  # noqa: E402
from run.vision import launch as vision_launch  # noqa: E402

# A matrix of the real shape, small enough for CI: scale "test" with 2 ranks at most.
TINY_VISION = {
    "dataset": "digits",
    "train_images": 64,
    "test_images": 32,
    "epochs": 1,
    "batch_size": 16,
    "lr": 0.002,
    "num_workers": 0,
    "seed": 0,
    "image_size": 32,
}


def tiny_matrix() -> dict:
    real = mx.load_matrix(mx.matrix_file())
    vision = {k: v for k, v in real["experiments"].items() if v["workload"] == "vision"}
    return {
        "scales": {
            "test": {
                "description": "tests",
                "gpus": [1, 2],
                "vision": dict(TINY_VISION),
                "llm": {},
            },
        },
        "experiments": {
            k: {
                **v,
                "fixed": {
                    fk: (fv.get("smoke") if isinstance(fv, dict) else fv)
                    for fk, fv in (v.get("fixed") or {}).items()
                },
                "vary": {
                    vk: (vv.get("smoke") if isinstance(vv, dict) else vv)
                    for vk, vv in (v.get("vary") or {}).items()
                },
            }
            for k, v in vision.items()
            if k in ("V1", "V2", "V3", "V4", "V7", "N1")  # N1: the vision noise cells
        },
    }


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    """Results, data and matrix in a temporary folder, for this process and its children."""
    return sandbox_env(tmp_path, monkeypatch)


def quiet_machine(scale: str, matrix: dict):
    from analysis import noise

    return noise.Floor(quiet=True)


def sandbox_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """What `sandbox` sets up, for fixtures of wider scope (pass a MonkeyPatch context)."""
    from analysis import noise

    # Made-up tables have no noise runs (N1/N2) beside them: the rules see a perfectly quiet
    # machine, a noise floor of zero. Tests of the floor itself put back noise.measure_runs.
    monkeypatch.setattr(noise, "measure", quiet_machine)
    matrix_file = tmp_path / "matrix.yaml"
    m = tiny_matrix()
    for e in m["experiments"].values():
        e["fixed"].pop("image_size", None)
        e["fixed"].pop("train_images", None)
        e["fixed"].pop("epochs", None)
        e["fixed"].pop("lr", None)  # V3/V4/V7's smoke learning setup: the tiny runs stay shared
        e["fixed"].pop("width_mult", None)
        if "image_size" in e["vary"]:
            e["vary"]["image_size"] = [32, 40]
    matrix_file.write_text(yaml.safe_dump(m))
    monkeypatch.setenv("MATRIX_FILE", str(matrix_file))
    monkeypatch.setenv("RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.setenv("DIGITS_DIR", str(REPO / "data" / "digits"))
    monkeypatch.setenv("MNIST_DIR", str(tmp_path / "no-mnist"))
    monkeypatch.setenv("PYTHONPATH", str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    monkeypatch.delenv("PROFILER", raising=False)
    # `make test PROFILE=smoke` exports PROFILE; the sandbox's matrix has no such scale, and
    # every entry point checks PROFILE against the matrix (run/settings.py)
    monkeypatch.delenv("PROFILE", raising=False)
    return tmp_path


@pytest.fixture(scope="session")
def make_sandbox():
    """sandbox_env itself, for fixtures of wider scope (tests/profiles has a conftest of its own,
    so `from conftest import` may find that one)."""
    return sandbox_env


@pytest.fixture(scope="module")
def module_sandbox(tmp_path_factory):
    """`sandbox` for a whole test module: yields (folder, MonkeyPatch) for fixtures to extend."""
    tmp = tmp_path_factory.mktemp("sandbox")
    with pytest.MonkeyPatch.context() as mp:
        sandbox_env(tmp, mp)
        yield tmp, mp


@pytest.fixture
def fake(sandbox, monkeypatch):
    """Vision runs launch tests/fake_sweep.py; returns the file listing every launch."""
    import fake_sweep  # tests/ is on sys.path for the test modules (pytest rootdir)

    launches = sandbox / "launches.txt"
    launches.touch()
    monkeypatch.setenv("FAKE_LAUNCHES", str(launches))
    monkeypatch.setattr(vision_launch, "launch_command", fake_sweep.fake_launch)
    return launches


@pytest.fixture(scope="session")
def cpu_checks(tmp_path_factory: pytest.TempPathFactory):
    """gpu-check's check list run once on this CPU (tests/real_runs.py), for the tests that read
    its runs. Its environment is set only while the runs are made, so it leaks into no test;
    the readers use the runs' absolute paths. Only integration tests ask for it. The one-rank LLM
    checks run in a second process beside the one-rank vision ones (real_runs.Lane)."""
    import real_runs  # tests/ is on sys.path for the test modules (pytest rootdir)

    root = tmp_path_factory.mktemp("cpu-checks")
    with pytest.MonkeyPatch.context() as mp:
        sandbox_env(root, mp)
        mp.setenv("LLM_DATA_ROOT", str(root / "llm"))
        for var in ("LLAMA3_DIR", "LLAMA3_TOKENIZER", "LLM_DATASETS_DIR"):
            mp.delenv(var, raising=False)
        return real_runs.make(scratch=root / "side-lane")


# ---- t7-slurm: test_report.py's fake sweep and report, made once for the modules that read it ----
@pytest.fixture(scope="session")
def fake_report_made(tmp_path_factory: pytest.TempPathFactory):
    """test_report.make_report's fake sweep of V1-V4 and V7, its tables, figures and report, once
    per session: (its sandbox folder, what make_report returns). As with cpu_checks, its
    environment is set only while it is made, so it leaks into no other test."""
    import test_report  # tests/ is on sys.path for the test modules (pytest rootdir)

    root = tmp_path_factory.mktemp("fake-report")
    with pytest.MonkeyPatch.context() as mp:
        sandbox_env(root, mp)
        return root, test_report.make_report((root, mp))


@pytest.fixture(scope="module")
def fake_report(fake_report_made):
    """fake_report_made for a module's tests (test_report.py, test_report_text.py): its sandbox
    (RESULTS_DIR, MATRIX_FILE, ...) set again for the module, as when each module made its own;
    what make_report returned. Readers copy the results folder before changing anything."""
    root, built = fake_report_made
    with pytest.MonkeyPatch.context() as mp:
        sandbox_env(root, mp)  # writes the same matrix.yaml again
        yield built


# ---- make test runs on pytest-xdist workers (-n 3 --dist loadfile) ----
# Modules whose tests read one session fixture: one worker takes them all, so the fixture is made
# once (the check list's runs: ~190 s; pytest_collection_modifyitems below stops a run that
# adds a reader without adding its module here).
SHARED = {
    "cpu_checks": ("test_gpu_check", "test_llm_integration", "test_llm_optimized",
                   "test_profiling", "test_vision_integration"),
    "fake_report_made": ("test_report", "test_report_text"),
}  # fmt: skip
GROUP_OF = {f"tests/{m}.py": fixture for fixture, mods in SHARED.items() for m in mods}
# The longest chain in one process (six trainings, the first compiling): a fresh clone's make test
# at e432ceb, -n 3, empty inductor cache, started it at 444 s and ended at 785 s, the last 135 s
# on one core (vmstat 50 % busy); the other workers had ended at 653 and 638 s. Handed out
# first (fresh clones at 049d8a3 and 2d7d2b6, same cold cache): 794.87 and 748.73 s against
# 803.36 s, the workers ending within 42 and 51 s of each other; one run each, so a small gain.
FIRST = "tests/test_vision_optimized.py"


@pytest.hookimpl(optionalhook=True)  # `pytest -p no:xdist` runs the suite in one process
def pytest_xdist_make_scheduler(config: pytest.Config, log):  # noqa: ANN001, ANN201
    """--dist loadfile, with the modules of one shared session fixture as one file. (xdist
    3.8's loadgroup marks do not reach pytest 9's node ids, so groups are made here.)"""
    if config.getvalue("dist") != "loadfile":
        return None
    # xdist hands out scopes by test count, most first (--loadscope-reorder, its default): that
    # mixes long and short modules. Putting the heaviest first was slower (fresh clone, -n 3:
    # 1065 s against 1004 s; three CPU-heavy modules at once cost 13 % more CPU seconds). One
    # module goes first all the same: FIRST's chain of trainings in one process, with inductor's
    # cold compile (as in CI: an empty cache), was the last thing running, on one core.
    from xdist.scheduler import LoadScopeScheduling

    class ByModule(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return GROUP_OF.get(module, module)

        def _assign_work_unit(self, node) -> None:  # noqa: ANN001
            if FIRST in self.workqueue:
                self.workqueue.move_to_end(FIRST, last=False)
            super()._assign_work_unit(node)

    return ByModule(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On an xdist worker (the workers collect): a module that reads a shared session fixture must
    be in SHARED, or the fixture would be made twice."""
    if not hasattr(config, "workerinput"):
        return
    for item in items:
        for fixture in SHARED:
            if fixture in item.fixturenames and item.nodeid.split("::")[0] not in GROUP_OF:
                raise pytest.UsageError(f"{item.nodeid} reads {fixture}: add its module to SHARED")
