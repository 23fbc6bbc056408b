"""The sweep: runs once, resumes after a kill, records failures, OOM and skipped cells."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from run import store
from run.node import numa, probe
from run.sweep import runner as sweep
from run.sweep.progress import Progress

FAKE_SWEEP = Path(__file__).with_name("fake_sweep.py")
sys.path.insert(0, str(FAKE_SWEEP.parent))


def launched(launches: Path) -> list[str]:
    return launches.read_text().split()


def test_sweep_runs_each_spec_once_and_shares_runs(fake):
    sweep.sweep(["V3", "V4"], "test")
    first = launched(fake)
    assert len(first) == 8  # V3: 3 precisions x 2; V4 adds the 2 pinned runs
    sweep.sweep(["V3", "V4", "V7"], "test")
    again = launched(fake)[len(first) :]
    assert len(again) == 2  # V7 adds fp64 and fp16 pinned at 2 ranks; nothing else repeats
    rec = store.read_json(store.sweeps_dir("test") / "V3.json")
    assert len(rec["runs"]) == 6 and all(r["status"] == "ok" for r in rec["runs"])
    assert not list((store.runs_dir("test") / store.STAGING).iterdir())
    one = store.run_dir("test", rec["runs"][0]["run"])
    assert {p.name for p in one.iterdir()} >= {
        "spec.json",
        "provenance.json",
        "summary.json",
        "log.txt",
    }
    prov = store.read_json(one / "provenance.json")
    # log.txt starts with the launch command and the NUMA policy in force (issue 11)
    head = (one / "log.txt").read_text().splitlines()[0]
    assert head.startswith("$ ") and head.endswith(numa.note(prov["numa"]))
    assert "# NUMA=" in head and ("not bound: " in head) != prov["numa"]["bound"]
    assert (
        prov["hardware"]["cpu_count"]
        and prov["versions"]["torch"]
        and prov["git"]["sha"] is not None
    )
    assert prov["spec"] == store.read_json(one / "spec.json")


def test_failed_and_oom_runs_are_recorded_and_the_sweep_goes_on(fake, monkeypatch):
    monkeypatch.setenv("FAKE_MODE", "fail:fp16")
    sweep.sweep(["V3"], "test")
    statuses = {
        r["run"]: r["status"] for r in store.read_json(store.sweeps_dir("test") / "V3.json")["runs"]
    }
    assert (
        sorted(statuses.values()).count("failed") == 2 and list(statuses.values()).count("ok") == 4
    )
    failed = next(n for n, s in statuses.items() if s == "failed")
    summary = store.read_json(store.run_dir("test", failed) / "summary.json")
    assert summary["error"] == "ValueError: synthetic failure for the test"
    # A rerun keeps the recorded failure unless asked to retry it.
    n = len(launched(fake))
    sweep.sweep(["V3"], "test")
    assert len(launched(fake)) == n
    monkeypatch.setenv("FAKE_MODE", "oom:fp16")
    sweep.sweep(["V3"], "test", retry_failed=True)
    assert len(launched(fake)) == n + 2
    assert store.read_json(store.run_dir("test", failed) / "summary.json")["status"] == "oom"


def test_gpu_counts_beyond_the_machine_are_skipped_and_listed(fake, monkeypatch):
    monkeypatch.setattr(probe, "max_ranks", lambda info: 1)
    sweep.sweep(["V4"], "test")
    rec = store.read_json(store.sweeps_dir("test") / "V4.json")
    assert len(rec["runs"]) == 2 and len(rec["skipped"]) == 2
    assert all("needs 2 ranks" in s["reason"] for s in rec["skipped"])
    assert not any(store.is_finished("test", s["run"]) for s in rec["skipped"])


def test_a_killed_sweep_resumes_with_only_the_missing_runs(fake, sandbox, monkeypatch):
    monkeypatch.setenv("FAKE_MODE", "hang:fp16")
    env = dict(os.environ)
    proc = subprocess.Popen(
        [sys.executable, str(FAKE_SWEEP), "--scale", "test", "--exp", "V3"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        cwd=Path(__file__).resolve().parent.parent,
    )
    # Wait until the hanging fp16 run is reached (fp16 comes last), then kill the whole sweep.
    deadline = time.time() + 120
    while time.time() < deadline:
        staged = list((store.runs_dir("test") / store.STAGING).glob("*fp16*"))
        if staged and proc.poll() is None:
            break
        time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done_before = {p.name for p in store.runs_dir("test").iterdir() if not p.name.startswith(".")}
    assert not (store.sweeps_dir("test") / "V3.json").exists()  # no record of a half sweep
    assert all(store.is_finished("test", n) for n in done_before)  # nothing half-written
    monkeypatch.setenv("FAKE_MODE", "ok")
    before = len(launched(fake))
    sweep.sweep(["V3"], "test")
    new = launched(fake)[before:]
    assert set(new).isdisjoint(done_before)
    assert len(new) == 6 - len(done_before)


def test_a_heartbeat_past_the_estimate_says_by_how_much(tmp_path):
    progress = Progress.__new__(Progress)  # no plan: the estimate is set by hand
    progress.estimates = {"run-a": 60.0}
    log = tmp_path / "log.txt"
    log.write_text("step 3\n")
    over = progress.heartbeat("run-a", 60.0 + 405, log)
    assert "over the estimate by 6m45s" in over and "left" not in over
    assert over.endswith("| step 3")
    under = progress.heartbeat("run-a", 15.0, log)
    assert "about 45s left" in under and "over" not in under
    assert "left" not in progress.heartbeat("run-b", 15.0, log)  # no estimate, no guess


def _gpu_profile(sandbox: Path, monkeypatch) -> None:  # noqa: ANN001
    """Scale `test` made a GPU scale, on a fake node of 2 GPUs that torch can use."""
    import yaml

    path = sandbox / "matrix.yaml"
    m = yaml.safe_load(path.read_text())
    m["scales"]["test"]["device"] = "gpu"
    path.write_text(yaml.safe_dump(m))
    two = [{"index": i, "uuid": f"GPU-{i}", "name": "H100", "driver": "580.65.06"} for i in (0, 1)]
    monkeypatch.setattr(probe, "gpus", lambda: two)
    monkeypatch.setattr(probe, "cuda_problem", lambda info, b=None: None)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("SLURM_GPUS_ON_NODE", raising=False)


def test_a_failed_gpu_sweep_writes_a_bundle_with_the_failed_runs(
    fake, sandbox, monkeypatch, capsys
):
    import json
    import tarfile

    _gpu_profile(sandbox, monkeypatch)
    monkeypatch.setenv("FAKE_MODE", "fail:fp16")
    assert sweep.sweep(["V3"], "test") == 0  # failures are recorded, the sweep goes on
    path = store.scale_dir("test") / "bundles" / "V3.tar.gz"
    out = capsys.readouterr().out.splitlines()
    assert f"[sweep] 2 run(s) failed: attach {path} to a report" in out[-1]
    with tarfile.open(path) as tar:
        got = {m.name: tar.extractfile(m).read().decode() for m in tar.getmembers()}
    runs = json.loads(got["V3/runs.json"])
    assert len(runs) == 2 and all("fp16" in r["run"] for r in runs)
    assert {r["root_cause"] for r in runs} == {"ValueError: synthetic failure for the test"}
    for r in runs:
        assert got[f"V3/{r['log']}"].rstrip().endswith("ValueError: synthetic failure for the test")
    assert json.loads(got["V3/versions.json"])["driver"] == "580.65.06"
    monkeypatch.setenv("FAKE_MODE", "ok")
    path.unlink()
    sweep.sweep(["V3"], "test", retry_failed=True)  # nothing fails: no bundle
    assert not path.exists() and "attach" not in capsys.readouterr().out


def test_a_failed_sweep_of_a_cpu_profile_writes_no_bundle(fake, monkeypatch, capsys):
    monkeypatch.setenv("FAKE_MODE", "fail:fp16")
    sweep.sweep(["V3"], "test")
    assert not (store.scale_dir("test") / "bundles").exists()
    assert "attach" not in capsys.readouterr().out
