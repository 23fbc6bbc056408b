"""Strategies hand each rank the right samples; precision set-up; the embedded data set."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from run import digits, vision_spec
from run.tvcompat import import_torchvision
from run.vision import precision_setup, rank_batches

N, BS = 100, 8


def flat(batches):
    return [i for b in batches for i in b]


@pytest.mark.parametrize("world", [2, 3, 4])
def test_ddp_gives_every_rank_everything(world):
    for rank in range(world):
        got = flat(rank_batches("ddp", N, BS, world, rank))
        assert sorted(got) == list(range(N))


@pytest.mark.parametrize("world", [2, 3, 4])
def test_round_robin_splits_batches_by_index(world):
    all_batches = rank_batches("ddp", N, BS, 1, 0)  # the order every rank loads
    seen = []
    for rank in range(world):
        mine = rank_batches("ddp_rr", N, BS, world, rank)
        assert mine == all_batches[rank::world]
        seen += flat(mine)
    assert sorted(seen) == list(range(N))  # disjoint and complete


@pytest.mark.parametrize("world", [2, 3, 4])
def test_distributed_sampler_shards(world):
    shards = [set(flat(rank_batches("ddp_ds", N, BS, world, r))) for r in range(world)]
    sizes = [len(flat(rank_batches("ddp_ds", N, BS, world, r))) for r in range(world)]
    assert len(set(sizes)) == 1 and sizes[0] == -(-N // world)  # equal shards, padded
    assert set().union(*shards) == set(range(N))
    # Padding repeats at most world-1 samples; apart from those the shards are disjoint.
    assert sum(len(s) for s in shards) - N < world


def test_epochs_reshuffle_identically_on_all_ranks():
    e0 = rank_batches("ddp_rr", N, BS, 2, 0, epoch=0)
    e1 = rank_batches("ddp_rr", N, BS, 2, 0, epoch=1)
    assert e0 != e1
    assert e1 == rank_batches("ddp_rr", N, BS, 2, 0, epoch=1)


def test_precision_setup_on_cpu():
    cpu = torch.device("cpu")
    dtype, ctx, scaler, label = precision_setup("fp64", cpu)
    assert dtype == torch.float64 and scaler is None and label == "fp64"
    dtype, ctx, scaler, label = precision_setup("fp16", cpu)
    assert dtype == torch.float32 and scaler is None and "bf16" in label and "CPU" in label
    with ctx():
        y = torch.nn.Linear(4, 4)(torch.randn(2, 4))
    assert y.dtype == torch.bfloat16
    _, ctx, _, label = precision_setup("fp32", cpu)
    with ctx():
        assert torch.nn.Linear(4, 4)(torch.randn(2, 4)).dtype == torch.float32
    with pytest.raises(ValueError):
        precision_setup("fp8", cpu)


def test_digits_are_mnist_files_that_torchvision_reads(tmp_path):
    digits.generate(tmp_path, 40, 10, seed=3)
    tv = import_torchvision()
    ds = tv.datasets.MNIST(str(tmp_path), train=True, download=False)
    assert len(ds) == 40
    img, label = ds[0]
    assert img.size == (28, 28) and 0 <= label <= 9
    again = tmp_path / "again"
    digits.generate(again, 40, 10, seed=3)
    a = (digits.raw_dir(tmp_path) / "train-images-idx3-ubyte").read_bytes()
    assert a == (digits.raw_dir(again) / "train-images-idx3-ubyte").read_bytes()  # deterministic
    labels = np.frombuffer(
        (digits.raw_dir(tmp_path) / "train-labels-idx1-ubyte").read_bytes()[8:], np.uint8
    )
    assert len(set(labels.tolist())) > 5


def test_missing_and_corrupt_mnist_are_reported(tmp_path, monkeypatch):
    monkeypatch.setenv("MNIST_DIR", str(tmp_path / "absent"))
    spec = {"dataset": "mnist", "train_images": 10, "test_images": 10}
    with pytest.raises(FileNotFoundError, match="MNIST not found"):
        vision_spec.preflight([spec])
    corrupt = tmp_path / "corrupt"
    raw = digits.raw_dir(corrupt)
    raw.mkdir(parents=True)
    for name in (
        "train-images-idx3-ubyte",
        "train-labels-idx1-ubyte",
        "t10k-images-idx3-ubyte",
        "t10k-labels-idx1-ubyte",
    ):
        (raw / name).write_bytes(b"garbage!")
    monkeypatch.setenv("MNIST_DIR", str(corrupt))
    with pytest.raises(FileNotFoundError, match="corrupt"):
        vision_spec.preflight([spec])
