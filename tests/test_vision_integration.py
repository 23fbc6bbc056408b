"""The real vision entry point under torchrun with gloo ranks, and the bad inputs it refuses."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from run import store
from run.node import probe
from run.vision import launch as vision_launch
from run.vision import spec as vision_spec

REPO = Path(__file__).resolve().parent.parent
TINY = {
    "train_images": 64,
    "test_images": 32,
    "epochs": 1,
    "batch_size": 16,
    "image_size": 32,
    "gpus": 2,
}


def spec_of(**over) -> dict:
    spec = dict(vision_spec.DEFAULTS)
    spec.update(TINY)
    spec.update(over)
    return vision_spec.canonical(spec)


def launch(spec: dict, run_dir: Path, nproc: int | None = None) -> subprocess.CompletedProcess:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "spec.json").write_text(json.dumps(spec))
    cmd = vision_launch.launch_command(spec, run_dir, probe.probe())
    if nproc is not None:
        cmd = [f"--nproc_per_node={nproc}" if a.startswith("--nproc") else a for a in cmd]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600, check=False)


@pytest.mark.integration
@pytest.mark.parametrize("strategy", ["ddp", "ddp_rr", "ddp_ds"])
def test_two_gloo_ranks_train_with_each_strategy(cpu_checks, strategy):
    """DDP does the whole set on every rank, DDP-RR and DDP-DS split it. The runs are gpu-check's
    vision-ddp* checks (the session's, tests/real_runs.py): run.vision under torchrun, 2 ranks."""
    check = cpu_checks["vision-" + strategy.replace("_", "-")]
    spec, summary = check.spec, check.summary()
    assert spec["strategy"] == strategy and spec["gpus"] == 2 and spec["epochs"] == 1
    assert summary["status"] == "ok" and summary["world_size"] == 2
    (epoch,) = store.read_jsonl(check.run_dir / store.EPOCHS)
    n, bs, world = spec["train_images"], spec["batch_size"], 2
    assert epoch["images"] == (n * world if strategy == "ddp" else n)
    assert 0 < epoch["train_loss"] < 10 and summary["memory_kind"] == "host_peak_rss"
    # every strategy but DDP-DS sends every batch of the set to every rank's device; DDP-RR
    # trains on every other one of them
    every, shard = math.ceil(n / bs), math.ceil(math.ceil(n / world) / bs)
    loaded = {"ddp": every, "ddp_rr": every, "ddp_ds": shard}[strategy]
    trained = {"ddp": every, "ddp_rr": math.ceil(every / world), "ddp_ds": shard}[strategy]
    assert summary["rank0_batches_to_device"] == loaded
    assert summary["rank0_batches_trained"] == trained
    assert summary["input_dtype"] == "float32"


@pytest.mark.integration
@pytest.mark.parametrize(
    "over, nproc, message",
    [
        ({"precision": "fp8"}, None, "precision='fp8' is not one of"),
        ({"strategy": "ring"}, None, "strategy='ring' is not one of"),
        ({"gpus": 2}, 1, "asks for 2 rank(s) but 1 were started"),
        ({"gpus": 1, "dataset": "mnist"}, None, "MNIST not found under"),
    ],
)
def test_bad_input_is_one_line_and_leaves_no_summary(sandbox, over, nproc, message):
    spec = dict(spec_of(gpus=1), **over)
    run_dir = sandbox / "bad"
    run_dir.mkdir()
    (run_dir / "spec.json").write_text(json.dumps(spec))
    cmd = [sys.executable, "-m", "run.vision", "--spec", str(run_dir / "spec.json")]
    cmd += ["--run-dir", str(run_dir)]
    env = dict(os.environ, WORLD_SIZE=str(nproc or spec["gpus"]), RANK="0")
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, env=env, check=False)
    assert proc.returncode == 2
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0]
    assert sorted(p.name for p in run_dir.iterdir()) == ["spec.json"]


def test_unknown_experiment_or_profile_is_one_line(sandbox):
    for args, message in (
        (["--scale", "test", "--exp", "V99"], "unknown experiment 'V99'"),
        (["--scale", "huge", "--exp", "V3"], "unknown scale 'huge'"),
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "run.sweep", *args],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=False,
        )
        assert proc.returncode == 2
        assert proc.stderr.strip().splitlines() == [f"error: {proc.stderr.strip()[7:]}"]
        assert message in proc.stderr
    assert not (sandbox / "results").exists()
