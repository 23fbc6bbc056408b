"""The real vision entry point under torchrun with gloo ranks, and the bad inputs it refuses."""

from __future__ import annotations

import json
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
@pytest.mark.parametrize("strategy, images", [("ddp", 128), ("ddp_rr", 64), ("ddp_ds", 64)])
def test_two_gloo_ranks_train_with_each_strategy(sandbox, strategy, images):
    """DDP does the whole set on every rank (2 x 64 images), DDP-RR and DDP-DS split it."""
    run_dir = sandbox / strategy
    proc = launch(spec_of(strategy=strategy), run_dir)
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = store.read_json(run_dir / store.SUMMARY)
    assert summary["status"] == "ok" and summary["world_size"] == 2
    (epoch,) = store.read_jsonl(run_dir / store.EPOCHS)
    assert epoch["images"] == images
    assert 0 < epoch["train_loss"] < 10 and summary["memory_kind"] == "host_peak_rss"
    # every strategy but DDP-DS sends every batch of the set to every rank's device; DDP-RR
    # trains on every other one of them
    loaded = {"ddp": 4, "ddp_rr": 4, "ddp_ds": 2}[strategy]
    trained = {"ddp": 4, "ddp_rr": 2, "ddp_ds": 2}[strategy]
    assert summary["rank0_batches_to_device"] == loaded
    assert summary["rank0_batches_trained"] == trained
    assert summary["input_dtype"] == "float32"


@pytest.mark.integration
def test_a_smoke_sized_run_learns_well_above_chance(sandbox):
    """512 embedded digits at 48 px, 4 epochs, one rank: accuracy far above the 10 % of chance.

    (Of the smoke profile's own runs V3/V4/V7/O1's are sized to learn: a quarter-width model on
    1280 images, ~90 % test accuracy; so are Scenario B's, V8-V11/O2, tests/test_scenario_b.py.
    The others are shorter and stay near chance; the report says their accuracies are not
    comparable with the paper's.)"""
    run_dir = sandbox / "learn"
    spec = spec_of(gpus=1, train_images=512, test_images=128, epochs=4, image_size=48, lr=0.001)
    proc = launch(spec, run_dir)
    assert proc.returncode == 0, proc.stderr[-2000:]
    epochs = store.read_jsonl(run_dir / store.EPOCHS)
    assert epochs[-1]["train_loss"] < epochs[0]["train_loss"]
    assert store.read_json(run_dir / store.SUMMARY)["final_test_accuracy_pct"] > 30


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
        (["--profile", "test", "--exp", "V99"], "unknown experiment 'V99'"),
        (["--profile", "huge", "--exp", "V3"], "unknown profile 'huge'"),
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
