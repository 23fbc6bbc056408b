"""The slurm tier (`make test-slurm`): `make slurm` on a real one-node SLURM cluster
(tests/slurm_cluster.py) runs the README's instructions as written: a job array shares the runs
and the report job follows it, a requeue near the time limit and a cancel lose nothing.

The runs are the sandbox's (tests/conftest.py): experiment V3 (table-precision) and the vision
noise cells N1 of a tiny matrix, a few seconds each on CPU with gloo ranks; N2 (the LLM noise
cells) asks for more ranks than any machine has, so its sweep skips them. The requeue and the
cancel need only two runs of 4 epochs (N1 made of V3's very runs), so that the run they stop
always has epochs left (a 1-epoch run caught at its only epoch is at its end); they share one
results folder and one sequence of jobs (stopped_twice): the cancelled job's resubmission is the
job that is requeued. ARTIFACTS on make's command line limits every job to these two targets; no
scale is added for the tests.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml
from slurm_cluster import Cluster, cluster_fixture  # noqa: F401 (the fixture `cluster`)

from run import settings, store
from run.node import lifeline
from run.sweep import matrix as mx

pytestmark = [pytest.mark.slurm, pytest.mark.integration]

REPO = Path(__file__).resolve().parent.parent
SCALE = "test"
ARTIFACTS = "table-precision table-noise"  # experiments V3, N1, N2 of experiments/matrix.yaml
# Two tasks of the array on one node: a share of the GPUs each, and --oversubscribe to lift the
# script's --exclusive (options on sbatch's command line win over its #SBATCH lines).
SHARE = "--oversubscribe --gres=gpu:2"
LAUNCH = re.compile(r"^\[\d+/\d+\] (\S+) \(est", re.M)  # the sweep's line as it starts a run
# Bounds on waits for a state (a job ended, a run in flight, a job stopped): they fail a test that
# hangs and are never waited out, so they are generous enough for a loaded 2-core machine.
JOB_S = 900
STOP_S = 180


def _matrix(
    path: Path, precisions: list[str], noise_is_v3: bool = False, **fixed: int
) -> list[str]:
    """Reshape the sandbox's matrix to V3 (`precisions` at 1 and 2 ranks, `fixed` on top of
    the scale's) and N1, with N2 skipped; the names of the runs to be done. N1 is one seed and
    its run beside a busy core per rank count, or with `noise_is_v3` the very runs of V3's fp32
    cells (the same `fixed`, no busy run): then every run is one of V3's."""
    m = yaml.safe_load(path.read_text())
    real = mx.load_matrix(REPO / "experiments" / "matrix.yaml")["experiments"]["N2"]
    v3, n1 = m["experiments"]["V3"], {**m["experiments"]["N1"], "repeats": 1}
    v3["fixed"].update(fixed)
    if noise_is_v3:
        n1["fixed"].update(fixed)
        n1["busy_repeats"] = 0
    v3["vary"] = {"precision": precisions, "gpus": "from-scale"}
    smoke = {k: v.get("smoke") if isinstance(v, dict) else v for k, v in real["fixed"].items()}
    n2 = {**real, "repeats": 1, "fixed": smoke, "vary": {"gpus": [4096]}}
    m["experiments"] = {"V3": v3, "N1": n1, "N2": n2}
    path.write_text(yaml.safe_dump(m))
    specs = [s for e in ("V3", "N1") for s in mx.expand(e, SCALE, m, n_repeats=1).specs]
    return sorted({mx.run_name(s) for s in specs})


def _tier_env(sandbox: Path, cluster: Cluster) -> dict[str, str]:
    """The environment `make slurm` is called with: the sandbox's matrix, results and data,
    this cluster's SLURM_CONF, no other setting of the caller's; SLURM logs in sandbox/logs."""
    (sandbox / "logs").mkdir()
    kept = ("MATRIX_FILE", "RESULTS_DIR", "DIGITS_DIR", "MNIST_DIR")
    names = {s.name for s in settings.SETTINGS} - set(kept)
    env = {k: v for k, v in os.environ.items() if k not in names and not k.startswith("SLURM_")}
    opts = f"{SHARE} --output={sandbox / 'logs'}/slurm-%x-%j.out"
    return {**env, "SLURM_CONF": cluster.env["SLURM_CONF"], "SBATCH_OPTS": opts}


@pytest.fixture
def tier(sandbox: Path, cluster: Cluster) -> Iterator[dict[str, str]]:
    """_tier_env for one test."""
    yield _tier_env(sandbox, cluster)
    cluster.cancel_all()  # a failed test's jobs must not run on into the next test


def _submit(env: dict[str, str], nodes: int) -> list[str]:
    """`make slurm NODES=n` as the README says; the ids of the jobs it submitted."""
    got = subprocess.run(
        ["make", "--no-print-directory", "slurm", f"NODES={nodes}", f"PROFILE={SCALE}",
         f"ARTIFACTS={ARTIFACTS}"], cwd=REPO, env=env, capture_output=True, text=True,
        timeout=STOP_S)  # fmt: skip
    assert got.returncode == 0, got.stderr
    return re.findall(r"(?:job array|batch job) (\d+)", got.stdout)


def _log(env: dict[str, str], job: dict[str, str]) -> str:
    path = Path(env["SBATCH_OPTS"].split("--output=")[1].replace("%x", job["JobName"]))
    path = Path(str(path).replace("%j", job["JobId"]))
    return path.read_text() if path.exists() else ""


def _runs(env: dict[str, str]) -> Path:
    return store.runs_dir(SCALE, Path(env["RESULTS_DIR"]))


def _published(env: dict[str, str]) -> list[str]:
    runs = _runs(env)
    return sorted(p.name for p in runs.iterdir() if not p.name.startswith(".")) if runs.exists() else []  # fmt: skip


def _leftovers(env: dict[str, str]) -> list[str]:
    """What a stopped attempt would leave half-written: staging folders, locks."""
    runs = _runs(env)
    return [p.name for d in (store.STAGING, ".locks") if (runs / d).exists() for p in (runs / d).iterdir()]  # fmt: skip


def _in_flight(env: dict[str, str], after: int, timeout: float = JOB_S) -> str:
    """Wait until `after` runs are published and another has trained an epoch in staging; the
    name of that run."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if len(_published(env)) >= after:
            for stage in (_runs(env) / store.STAGING).glob("*@*"):
                if store.read_jsonl(stage / store.EPOCHS):
                    return stage.name.split("@")[0]
        time.sleep(0.2)
    raise AssertionError(f"no run in flight after {after} published ones: {_published(env)}")


def _all_ok(env: dict[str, str], expected: list[str]) -> None:
    assert _published(env) == expected
    for name in expected:
        run = _runs(env) / name
        summary = store.read_summary(run)
        assert summary and summary["status"] == "ok", (name, summary)
        spec = store.read_json(run / store.SPEC)  # whole: every epoch, from the first
        epochs = [e["epoch"] for e in store.read_jsonl(run / store.EPOCHS)]
        assert epochs == list(range(1, spec["epochs"] + 1)), name
    assert _leftovers(env) == []
    assert (Path(env["RESULTS_DIR"]) / SCALE / "report" / "report.md").is_file()


def _stamp(t: str) -> float:
    return time.mktime(time.strptime(t, "%Y-%m-%dT%H:%M:%S"))


def test_the_cluster_starts_and_takes_the_job_script_as_written(cluster):
    assert cluster.startup_s > 0  # an idle node (start() waits for it); the time is printed
    print(f"cluster start-up: {cluster.startup_s:.2f} s")
    script = "run/slurm/artifact.sbatch"
    as_written = cluster.run("sbatch", "--test-only", script, cwd=REPO)
    assert "to start at" in as_written.stderr, as_written.stderr  # --gres=gpu:4, --exclusive, ...
    shared = cluster.run("sbatch", "--test-only", *SHARE.split(), script, cwd=REPO)
    cores = os.cpu_count() or 1
    # --exclusive takes every core of the node; the tests' options (as SBATCH_OPTS) lift it
    assert f"using {cores} processors" in as_written.stderr, as_written.stderr
    assert "using 1 processors" in shared.stderr, shared.stderr
    too_many = cluster.run("sbatch", "--test-only", "--gres=gpu:8", script, cwd=REPO,
                                 check=False)  # fmt: skip
    assert too_many.returncode != 0  # the gres are really counted


def test_an_array_of_two_shares_the_runs_then_the_report_job_builds_the_report(tier, cluster):
    # fp64 and fp32 (fp16 on a CPU is the slowest cell): 4 runs of V3 and N1's 2 beside a busy
    # core, 3 a task if they split evenly; N1's seed-0 runs are V3's fp32 ones
    expected = _matrix(Path(tier["MATRIX_FILE"]), ["fp64", "fp32"])
    assert len(expected) == 6
    t0 = time.monotonic()
    array, report = _submit(tier, nodes=2)
    done = cluster.wait(report, ("COMPLETED", "FAILED", "CANCELLED"), timeout=JOB_S)
    print(f"make slurm NODES=2: {time.monotonic() - t0:.1f} s to the report")
    tasks = sorted(cluster.jobs(array), key=lambda j: j["ArrayTaskId"])
    assert [t["ArrayTaskId"] for t in tasks] == ["1", "2"]
    for job in (*tasks, done):
        assert (job["JobState"], job["ExitCode"]) == ("COMPLETED", "0:0"), (
            f"{_log(tier, job)}\n{cluster.trail(job['JobId'])}"
        )
    a, b = tasks
    # both at once on the node, and the report job only once both had ended (afterany)
    assert _stamp(a["StartTime"]) < _stamp(b["EndTime"])
    assert _stamp(b["StartTime"]) < _stamp(a["EndTime"])
    assert _stamp(done["StartTime"]) >= max(_stamp(t["EndTime"]) for t in tasks)
    for t in tasks:  # each log starts with who ran it: job, array task, restart count
        first = _log(tier, t).splitlines()[0]
        assert first.startswith(f"[slurm] job {t['JobId']} task {t['ArrayTaskId']} on ")
        assert first.endswith(", restart 0")
    launched = [LAUNCH.findall(_log(tier, t)) for t in tasks]
    print(f"runs per array task: {[len(x) for x in launched]}")
    assert all(launched), launched  # each task took a share
    assert not set(launched[0]) & set(launched[1])  # no run launched by both
    assert sorted(launched[0] + launched[1]) == expected  # each run exactly once
    report_log = _log(tier, done)
    assert LAUNCH.findall(report_log) == []  # nothing left for the report job to run
    assert "report.md" in report_log
    _all_ok(tier, expected)


@dataclass
class Stopped:
    """What the cancel-then-requeue sequence saw (stopped_twice): each test asserts its part."""

    env: dict[str, str]
    expected: list[str]
    cancelled: str = ""  # the run in flight when job A was cancelled
    after_cancel: tuple[list[str], list[int], list[str]] = ([], [], [])  # leftovers, pids, runs
    job: str = ""  # job B, the resubmission, later requeued
    requeued: str = ""  # the run in flight when job B got USR1
    finished: dict[str, int] = field(default_factory=dict)  # published then: summary mtimes
    held: dict[str, str] = field(default_factory=dict)  # job B requeued, pending
    after_requeue: tuple[list[str], list[int], list[str]] = ([], [], [])
    done: dict[str, str] = field(default_factory=dict)  # job B at its end


def _left(env: dict[str, str]) -> tuple[list[str], list[int], list[str]]:
    """(half-written leftovers, processes of the runs still alive, published runs)."""
    return _leftovers(env), lifeline.members(f"{_runs(env).resolve()}/"), _published(env)


@pytest.fixture(scope="module")
def stopped_twice(module_sandbox, cluster: Cluster) -> Iterator[Stopped]:
    """A cancel and a requeue in one results folder, run once for the two tests that read them:
    job A is cancelled during its first run; job B, the resubmission, is stopped by the time-limit
    signal once it has finished that run and trained an epoch of the second, requeued, released
    and completed. Two runs of 4 epochs each (N1 made of V3's very runs), so that a stopped run
    always has epochs left (a 1-epoch run caught at its only epoch is at its end)."""
    sandbox, _ = module_sandbox
    env = _tier_env(sandbox, cluster)
    expected = _matrix(Path(env["MATRIX_FILE"]), ["fp32"], True, epochs=4, train_images=256)
    got = Stopped(env, expected)
    try:
        # job A: cancelled after the first run's first epoch of 4
        (job_a,) = _submit(env, nodes=1)
        got.cancelled = _in_flight(env, after=0)
        cluster.run("scancel", job_a)
        cluster.wait(job_a, ("CANCELLED",), timeout=STOP_S)
        # scancel sends SIGTERM to every process of the job: the sweep removes its staging folder
        # and lock before SLURM's SIGKILL (KillWait later)
        deadline = time.monotonic() + STOP_S
        while any(_left(env)[:2]) and time.monotonic() < deadline:
            time.sleep(0.2)
        got.after_cancel = _left(env)
        # job B, the resubmission: the first run finished, the second stopped after its first epoch
        (got.job,) = _submit(env, nodes=1)
        got.requeued = _in_flight(env, after=1)
        got.finished = {n: (_runs(env) / n / store.SUMMARY).stat().st_mtime_ns
                        for n in _published(env)}  # fmt: skip
        # what SLURM does 600 s before the time limit (--signal=B:USR1@600)
        cluster.run("scancel", "--signal=USR1", "--batch", got.job)
        got.held = cluster.wait(got.job, ("PENDING",), timeout=STOP_S)
        got.after_requeue = _left(env)
        # released at once, not after SLURM's own hold: once the node is done with the last
        # attempt and the credential it revoked is older than one issued now
        cluster.settled(got.job)
        cluster.run("scontrol", "update", f"JobId={got.job}", "StartTime=now")
        got.done = cluster.wait(got.job, ("COMPLETED", "FAILED", "CANCELLED"), timeout=JOB_S)
        yield got
    finally:
        cluster.cancel_all()  # a failed sequence's jobs must not run on into the next test


def test_a_requeue_stops_the_run_in_flight_and_the_restart_runs_only_the_missing_ones(
    stopped_twice, cluster
):
    got, env, job_id = stopped_twice, stopped_twice.env, stopped_twice.job
    assert len(got.expected) == 2 and got.requeued not in got.finished
    assert got.held["Restarts"] == "1"
    first = _log(env, got.held)
    assert f"requeueing job {job_id}" in first and "stopped by SIGTERM" in first
    # stopped, not finished: nothing of it is published, staged or locked, no process left
    leftovers, pids, published = got.after_requeue
    assert got.requeued not in published and leftovers == [] and pids == []
    done = got.done
    assert (done["JobState"], done["ExitCode"]) == ("COMPLETED", "0:0"), (
        f"{_log(env, done)}\n{cluster.trail(job_id)}"
    )
    log = _log(env, done)
    restart = log.index(f"[slurm] job {job_id} on ")
    restart = log.index(f"[slurm] job {job_id} on ", restart + 1)
    assert log[restart:].splitlines()[0].endswith("restart 1")
    again = LAUNCH.findall(log[restart:])
    assert got.requeued in again  # the interrupted run, from the start (its epochs: 1..4)
    assert sorted(again) == sorted(set(got.expected) - set(got.finished))  # only the missing ones
    for name, mtime in got.finished.items():  # finished ones are kept as they were
        assert (_runs(env) / name / store.SUMMARY).stat().st_mtime_ns == mtime
    _all_ok(env, got.expected)


def test_a_cancelled_job_leaves_nothing_half_written_and_a_resubmission_completes(
    stopped_twice, cluster
):
    got, env = stopped_twice, stopped_twice.env
    assert len(got.expected) == 2 and got.cancelled  # the first stopped after its first epoch of 4
    leftovers, pids, published = got.after_cancel
    assert leftovers == [] and pids == [] and got.cancelled not in published
    done = got.done  # the resubmission, through its requeue (the other test's part)
    assert (done["JobState"], done["ExitCode"]) == ("COMPLETED", "0:0"), (
        f"{_log(env, done)}\n{cluster.trail(got.job)}"
    )
    # its first attempt ran the cancelled run again, from the start
    first = _log(env, done).split(f"[slurm] job {got.job} on ")[1]
    assert got.cancelled in LAUNCH.findall(first)
    _all_ok(env, got.expected)
