"""The fault tier (`make test-faults`): a sweep killed, interrupted, stopped, fed a corrupt run, a
full disk, read-only results or a bad setting loses nothing, leaves no process, says one line,
and a rerun completes.

Each case runs a real sweep (`python -m run.sweep`) under real torchrun, in a results folder of
its own: F1, one vision cell at 1 and 2 gloo ranks, long enough to be stopped in flight; F2, the
same cell on one epoch of 32 images; F3, F2's 1-rank run alone. One finished sweep of F1 and F2 is
made once (`swept`); the cases that start from a finished sweep, or from one that died after
publishing F1's 1-rank run, start from a copy of it. The cases that only need some run to finish
(corrupt summaries, a full disk, read-only results, a left process) run F2's and F3's.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from test_settings import BAD  # tests/ is on sys.path (pytest rootdir)

from run import settings, store
from run.node import lifeline

pytestmark = [pytest.mark.faults, pytest.mark.integration]

REPO = Path(__file__).resolve().parent.parent
SCALE = "test"
EXP = "F1"  # one cell at 1 and 2 ranks: a run is killed while the other is published
SMALL = "F2"  # 32 images at 1 and 2 ranks: cases that need runs to finish, not to be stopped
ONE = "F3"  # F2's 1-rank run alone (shared): the cases that need one run
BIG = "-e4-n256"  # what F1's run names end with (F2's: -e1-n32)


def _matrix(m: dict) -> dict:
    f1 = dict(m["experiments"]["V3"])
    f1["title"], f1["target"] = "Faults", "table-faults"
    # Long enough to be killed mid-run (a few epochs of 2 gloo ranks), short enough for CI.
    f1["fixed"] = {"strategy": "ddp_ds", "pin_memory": False, "epochs": 4, "train_images": 256}
    f1["vary"] = {"precision": ["fp32"], "gpus": "from-scale"}
    f2 = {**f1, "fixed": {**f1["fixed"], "epochs": 1, "train_images": 32}}  # 2 steps of 16
    f3 = {**f2, "vary": {"precision": ["fp32"], "gpus": [1]}}
    m["experiments"] = {EXP: f1, SMALL: f2, ONE: f3}
    return m


def _tier_env(sandbox: Path) -> dict[str, str]:
    matrix = sandbox / "matrix.yaml"
    matrix.write_text(yaml.safe_dump(_matrix(yaml.safe_load(matrix.read_text()))))
    kept = ("MATRIX_FILE", "RESULTS_DIR", "DIGITS_DIR", "MNIST_DIR")
    names = {s.name for s in settings.SETTINGS} - set(kept)
    env = {k: v for k, v in os.environ.items() if k not in names}
    return {**env, "PYTHONPATH": str(REPO), "HEARTBEAT_S": "600"}


@pytest.fixture
def tier(sandbox: Path) -> dict[str, str]:
    """Environment of a sweep whose matrix holds F1 alone and whose results are in tmp (the
    sandbox's tiny matrix, results and data, no other setting of the caller's)."""
    return _tier_env(sandbox)


def _sweep(env: dict[str, str], *exps: str, **kw) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "run.sweep", "--scale", SCALE]
    for exp in exps or (EXP,):
        cmd += ["--exp", exp]
    return subprocess.Popen(
        cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw
    )


# Bounds on waits for a state (a sweep done, a run in flight, no process left): they fail a test
# that hangs and are never waited out, so they are generous enough for a loaded 2-core machine.
SWEEP_S = 900
STOP_S = 120


def _finish(env: dict[str, str], *exps: str) -> subprocess.CompletedProcess:
    proc = _sweep(env, *exps)
    out, err = proc.communicate(timeout=SWEEP_S)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _runs(env: dict[str, str]) -> Path:
    return store.runs_dir(SCALE, Path(env["RESULTS_DIR"]))


def _in_flight(env: dict[str, str], timeout: float = SWEEP_S) -> Path:
    """Wait until F1's 2-rank run has trained an epoch in staging: its ranks are alive then."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for stage in (_runs(env) / store.STAGING).glob(f"*2gpu*{BIG}@*"):
            if store.read_jsonl(stage / store.EPOCHS):
                return stage
        time.sleep(0.2)
    raise AssertionError("no 2-rank run reached its first epoch")


def _no_attempt_left(env: dict[str, str], within_s: float = STOP_S) -> None:
    """Wait until no process of any attempt is left (ranks die through their parent-death signal
    and DataLoader workers through torch's watchdog: seconds, more under load)."""
    prefix = f"{_runs(env).resolve()}/"
    deadline = time.monotonic() + within_s
    while lifeline.members(prefix) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert lifeline.members(prefix) == [], "a process of the first attempt is still alive"


def _clean(env: dict[str, str]) -> None:
    """Nothing half-written: no staging folder, no lock."""
    runs = _runs(env)
    assert not list((runs / store.STAGING).glob("*")) if (runs / store.STAGING).exists() else True
    assert not list((runs / ".locks").glob("*")) if (runs / ".locks").exists() else True


def _consistent(env: dict[str, str]) -> int:
    """Every published run is whole and agrees with itself; returns how many were checked."""
    checked = 0
    for run in _runs(env).iterdir():
        if run.name.startswith("."):
            continue
        summary = store.read_summary(run)
        assert summary and summary["status"] == "ok", (run.name, summary)
        spec = store.read_json(run / store.SPEC)
        epochs = store.read_jsonl(run / store.EPOCHS)
        assert [e["epoch"] for e in epochs] == list(range(1, spec["epochs"] + 1)), run.name
        assert summary["train_time_s"] <= summary["total_time_s"], run.name
        checked += 1
    return checked


def _one_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory, make_sandbox) -> Path:
    """The results of one finished sweep of F1 and F2 (F3's run is F2's 1-rank one), made once for
    the cases that start from a finished sweep, or from one that died after F1's 1-rank run: each
    copies it, none changes it."""
    tmp = tmp_path_factory.mktemp("swept")
    with pytest.MonkeyPatch.context() as mp:
        make_sandbox(tmp, mp)
        env = _tier_env(tmp)
    done = _finish(env, EXP, SMALL)
    assert done.returncode == 0, done.stderr
    assert _consistent(env) == 4
    _clean(env)
    return Path(env["RESULTS_DIR"])


def _died_after_one_run(env: dict[str, str], swept: Path) -> None:
    """The results of an F1 sweep that died after publishing its 1-rank run, before its record:
    a copy of `swept` without F1's 2-rank run and the records. The next F1 sweep reuses the 1-rank
    run and launches the 2-rank one at once: the run a signal case stops in flight."""
    root = Path(env["RESULTS_DIR"])
    shutil.copytree(swept, root, symlinks=True)
    (two,) = _runs(env).glob(f"*2gpu*{BIG}")
    shutil.rmtree(two)
    shutil.rmtree(store.sweeps_dir(SCALE, root))
    assert len([r for r in _runs(env).iterdir() if not r.name.startswith(".")]) == 3  # F2's too


def test_a_sweep_killed_outright_leaves_no_process_and_a_rerun_completes(tier, swept):
    # As `kill -9` on make's process group: the sweep and torchrun die, the ranks (sessions of
    # their own) must follow through their parent-death signal.
    _died_after_one_run(tier, swept)
    proc = _sweep(tier, start_new_session=True)
    stage = _in_flight(tier)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    _no_attempt_left(tier)
    # Ranks left running would have finished the run into the dead attempt's folder by now.
    assert not (stage / store.SUMMARY).exists()
    done = _finish(tier)
    assert done.returncode == 0, done.stderr
    assert f"[sweep] {EXP}: 2 runs (1 new, 1 reused)" in done.stdout  # the published run kept
    assert _consistent(tier) == 4
    _clean(tier)


def _sigint_ignored() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.parametrize(("sig", "code", "word"), [(signal.SIGINT, 130, "Ctrl-C"),
                                                  (signal.SIGTERM, 143, "SIGTERM")])  # fmt: skip
def test_an_interrupted_sweep_says_one_line_and_leaves_nothing(tier, swept, sig, code, word):
    # The sweep starts with SIGINT ignored, as a script's background job (and a CI's make test)
    # starts it: Python then leaves SIGINT ignored unless the sweep takes it back. It used to
    # stay ignored: Ctrl-C killed torchrun alone, and the sweep recorded the run failed and
    # exited 0. With SIGINT at its default the sweep takes the same path.
    _died_after_one_run(tier, swept)
    proc = _sweep(tier, start_new_session=True, preexec_fn=_sigint_ignored)
    _in_flight(tier)
    # Ctrl-C reaches the terminal's whole process group; SIGTERM (SLURM, kill) the sweep alone.
    if sig == signal.SIGINT:
        os.killpg(proc.pid, sig)
    else:
        proc.send_signal(sig)
    _, err = proc.communicate(timeout=STOP_S)
    assert proc.returncode == code, err
    assert word in _one_line(err)
    _no_attempt_left(tier, within_s=1)
    _clean(tier)
    done = _finish(tier)
    assert done.returncode == 0, done.stderr
    assert f"[sweep] {EXP}: 2 runs (1 new, 1 reused)" in done.stdout
    assert _consistent(tier) == 4


def test_corrupt_summaries_are_failed_runs_that_the_next_sweep_redoes(tier, swept):
    shutil.copytree(swept, tier["RESULTS_DIR"], symlinks=True)
    runs = sorted(r for r in _runs(tier).iterdir() if not r.name.startswith("."))
    runs = [r for r in runs if not r.name.endswith(BIG)]  # F2's runs, at 1 and 2 ranks
    for run, content in zip(runs, ["{", "[]"], strict=True):  # truncated; not an object
        (run / store.SUMMARY).write_text(content)
    done = _finish(tier, SMALL)
    assert done.returncode == 0, done.stderr
    for run in runs:
        assert f"unreadable run {run.name} (summary.json" in done.stdout
    assert f"[sweep] {SMALL}: 2 runs (2 new, 0 reused)" in done.stdout
    assert _consistent(tier) == 4


@pytest.mark.parametrize("content", ["", "{", "[]", '{"status": "ok"', '{"status": "done"}'])
def test_read_summary_reads_every_corruption_as_a_failed_run(tmp_path, content):
    (tmp_path / store.SPEC).write_text("{}")
    (tmp_path / store.SUMMARY).write_text(content)
    got = store.read_summary(tmp_path)
    assert got["status"] == "failed" and store.is_unreadable(got)
    assert got["error"].startswith(f"unreadable run {tmp_path.name} (summary.json")


def _mount(target: Path, opts: str) -> None:
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    target.mkdir(parents=True, exist_ok=True)
    got = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(target)],
                         capture_output=True, text=True, check=False)  # fmt: skip
    if got.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {got.stderr.strip()}")


@pytest.fixture
def mounted(tier):
    target = Path(tier["RESULTS_DIR"])
    yield target
    subprocess.run(["umount", "-l", str(target)], capture_output=True, check=False)


def test_a_full_disk_says_one_line_and_a_rerun_with_space_completes(tier, mounted):
    _mount(mounted, "size=1m")
    filler = mounted / "filler"
    fd = os.open(filler, os.O_CREAT | os.O_WRONLY)
    try:  # fill it to the last byte
        while os.write(fd, b"\0" * 4096):
            pass
    except OSError:
        pass
    finally:
        os.close(fd)
    done = _finish(tier, ONE)
    assert done.returncode == 1
    line = _one_line(done.stderr)
    assert "No space left on device" in line and str(mounted) in line  # the reason and the path
    _clean(tier)
    filler.unlink()
    done = _finish(tier, ONE)
    assert done.returncode == 0, done.stderr
    assert _consistent(tier) == 1


def test_read_only_results_say_one_line_and_a_rerun_when_writable_completes(tier, mounted):
    _mount(mounted, "ro,size=64m")
    done = _finish(tier, ONE)
    assert done.returncode == 2
    line = _one_line(done.stderr)
    assert "Read-only file system" in line and str(mounted) in line
    subprocess.run(["mount", "-o", "remount,rw", str(mounted)], check=True)
    done = _finish(tier, ONE)
    assert done.returncode == 0, done.stderr
    assert _consistent(tier) == 1


def test_every_bad_setting_stops_the_sweep_before_any_work(tier, swept):
    # a value each kind refuses (None: the kind takes any text)
    bad = {s.name: next(iter(BAD[s.kind]), None) for s in settings.SETTINGS}
    assert len(bad) == len(settings.SETTINGS)  # every setting a user can set has a bad value
    checked = 0
    for name, value in bad.items():
        if value is None:  # free text (a token, a path made later): nothing to refuse
            continue
        done = subprocess.run(
            [sys.executable, "-m", "run.sweep", "--scale", SCALE, "--exp", ONE],
            cwd=REPO, env={**tier, name: value}, capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert done.returncode == 2, (name, value, done.stderr)
        assert name in _one_line(done.stderr), (name, done.stderr)
        assert not Path(tier["RESULTS_DIR"]).exists(), name
        checked += 1
    assert checked >= 10
    # The same environment without a bad value passes every check and ends the sweep: on a copy
    # of `swept`, whose F2 1-rank run is F3's, reused (a fresh F3 run in this environment is what
    # the process-left, full-disk and read-only cases make).
    shutil.copytree(swept, tier["RESULTS_DIR"], symlinks=True)
    done = _finish(tier, ONE)
    assert done.returncode == 0, done.stderr
    assert f"[sweep] {ONE}: 1 runs (0 new, 1 reused)" in done.stdout
    assert _consistent(tier) == 4


def test_a_timed_out_run_is_failed_and_leaves_no_process(tier):
    # A run that lasts far longer than the limit on any machine (400 epochs of F1's 256 images),
    # so that it is the limit, not the machine's speed, that ends it.
    matrix = Path(tier["MATRIX_FILE"])
    m = yaml.safe_load(matrix.read_text())
    m["experiments"][ONE]["fixed"] = {**m["experiments"][EXP]["fixed"], "epochs": 400}
    matrix.write_text(yaml.safe_dump(m))
    done = subprocess.run(
        [sys.executable, "-m", "run.sweep", "--scale", SCALE, "--exp", ONE],
        cwd=REPO, env={**tier, "RUN_TIMEOUT_S": "3"}, capture_output=True, text=True, check=False,
        timeout=SWEEP_S,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    _no_attempt_left(tier, within_s=1)
    _clean(tier)
    runs = [r for r in _runs(tier).iterdir() if not r.name.startswith(".")]
    assert len(runs) == 1
    for run in runs:
        summary = store.read_summary(run)
        assert summary["status"] == "failed" and summary["error"] == "timed out after 3 s"


def test_a_process_an_earlier_attempt_left_is_stopped_and_named(tier):
    run = _runs(tier) / "mnv2-fp32-ddp_ds-1gpu-32px-nopin-e1-n32"  # F3's
    tag = f"{run.resolve()}#elsewhere-1-1"
    left = subprocess.Popen(["sleep", "120"], env={**tier, lifeline.ATTEMPT_ENV: tag})
    try:
        done = _finish(tier, ONE)
        assert done.returncode == 0, done.stderr
        assert f"{run.name}: stopped 1 process(es) left by an earlier attempt" in done.stdout
        assert left.wait(timeout=10) == -signal.SIGTERM
    finally:
        left.kill()
    assert _consistent(tier) == 1


WRITERS = {  # every atomic writer of run/: mkstemp alone makes 0o600
    "store": "from run import store; store.write_json_atomic(p, {})",
    "data": "from run.llm.data import readers; readers.write_jsonl(p, [{}])",
    "bundle": "from run.node import bundle; bundle.write(p, {'a': 'b'})",
}


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_run_files_follow_the_umask(tmp_path, writer):
    code = (
        "import os, sys; os.umask(0o027); from pathlib import Path; p = Path(sys.argv[1]); "
        f"{WRITERS[writer]}; print(oct(os.stat(p).st_mode & 0o777))"
    )
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "x")], cwd=REPO,
                          capture_output=True, text=True, check=True)  # fmt: skip
    assert done.stdout.strip() == "0o640"
