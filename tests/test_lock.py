"""Run locks (run/sweep/lock.py): sweeps sharing a results folder run every run exactly once, and the
lock of a killed sweep is recovered by the next one."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from run import store
from run.sweep import lock
from run.sweep import runner as sweep

FAKE_SWEEP = Path(__file__).with_name("fake_sweep.py")
REPO = Path(__file__).resolve().parent.parent


def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def plant(scale: str, name: str, host: str, pid: int, age_s: float = 0.0) -> Path:
    path = lock.lock_path(scale, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"host": host, "pid": pid, "job": "42", "since": "then"}))
    if age_s:
        t = time.time() - age_s
        os.utime(path, (t, t))
    return path


def test_a_lock_is_held_once_and_released(sandbox):
    first = lock.acquire("test", "r1")
    assert first is not None and lock.acquire("test", "r1") is None
    assert lock.holder(first.path)["pid"] == os.getpid()
    first.release()
    again = lock.acquire("test", "r1")
    assert again is not None
    again.release()
    assert not again.path.exists()


def test_stale_locks_are_taken_over_and_live_ones_are_not(sandbox, monkeypatch):
    here = socket.gethostname()
    plant("test", "dead", here, dead_pid())  # killed on this host: stale at once
    got = lock.acquire("test", "dead")
    assert got is not None and lock.holder(got.path)["pid"] == os.getpid()
    got.release()
    plant("test", "elsewhere", "other-node", 1)  # another node, touched just now: live
    assert lock.acquire("test", "elsewhere") is None
    assert "other-node pid 1 (SLURM job 42)" == lock.describe(lock.lock_path("test", "elsewhere"))
    plant("test", "silent", "other-node", 1, age_s=lock.stale_s() + 5)  # untouched: stale
    got = lock.acquire("test", "silent")
    assert got is not None
    got.release()
    assert not list(lock.lock_path("test", "x").parent.glob("*.stale-*"))  # nothing left behind


def test_the_holder_touches_its_lock(sandbox, monkeypatch):
    monkeypatch.setenv("LOCK_STALE_S", "0.4")
    held = lock.acquire("test", "beat")
    t = time.time() - 100
    os.utime(held.path, (t, t))
    # the next heartbeat (every STALE_S / 4) touches it: waited for, not slept for (a thread
    # of a loaded machine may run late); the bound only fails a holder that never touches it
    deadline = time.monotonic() + 60
    while time.time() - held.path.stat().st_mtime > 50 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert time.time() - held.path.stat().st_mtime < 50
    held.release()


def start(env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(FAKE_SWEEP), "--scale", "test", "--exp", "V3", "--exp", "V4"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        cwd=REPO,
    )


def test_two_sweeps_at_once_run_every_run_exactly_once(fake, sandbox, monkeypatch):
    monkeypatch.setenv("FAKE_MODE", "slow:fp32")  # runs that overlap in time
    monkeypatch.setenv("LOCK_POLL_S", "0.2")
    procs = [start(dict(os.environ)), start(dict(os.environ))]
    outs = [p.communicate(timeout=240)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    runs = fake.read_text().split()
    assert len(runs) == 8 and len(set(runs)) == 8  # V3's 6 runs and V4's 2 pinned ones, once each
    assert any("taken by" in o for o in outs)  # they did meet
    for exp, n in (("V3", 6), ("V4", 4)):
        rec = store.read_json(store.sweeps_dir("test") / f"{exp}.json")
        assert len(rec["runs"]) == n and all(r["status"] == "ok" for r in rec["runs"])
    assert not list(lock.lock_path("test", "x").parent.iterdir())


def test_a_killed_sweep_leaves_a_lock_the_next_sweep_recovers(fake, sandbox, monkeypatch):
    monkeypatch.setenv("FAKE_MODE", "hang:fp16")
    proc = start(dict(os.environ))
    deadline = time.time() + 120
    locks = lock.lock_path("test", "x").parent
    while time.time() < deadline:
        if list((store.runs_dir("test") / store.STAGING).glob("*fp16*")):
            break
        time.sleep(0.3)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    left = [p.name for p in locks.glob("*fp16*.lock")]
    assert len(left) == 1  # the killed sweep's lock is still there
    monkeypatch.setenv("FAKE_MODE", "ok")
    before = len(fake.read_text().split())
    sweep.sweep(["V3"], "test")
    again = fake.read_text().split()[before:]
    assert left[0].removesuffix(".lock") in again  # recovered and run
    assert not list(locks.iterdir())
