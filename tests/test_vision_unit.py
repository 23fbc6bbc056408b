"""Strategies hand each rank the right samples; precision set-up; the embedded data set."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
import torch

from run.node import toolchain
from run.vision import digits
from run.vision import launch as vision_launch
from run.vision import spec as vision_spec
from run.vision.inputs import keeps_batch, make_sampler, scenario_a_transform, set_epoch
from run.vision.loop import precision_setup
from run.vision.tvcompat import import_torchvision

N, BS = 100, 8


def rank_batches(
    strategy: str, n: int, batch_size: int, world: int, rank: int, epoch: int = 0, seed: int = 0
) -> list[list[int]]:
    """The sample indices rank `rank` trains on in one epoch, batch by batch, from the loader's
    own sampler and batch filter."""
    sampler = make_sampler(strategy, n, world, rank, seed)
    set_epoch(sampler, epoch, seed)
    order = list(sampler)
    batches = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    return [b for i, b in enumerate(batches) if keeps_batch(strategy, i, world, rank)]


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
    p = precision_setup("fp64", cpu)
    assert p.model_dtype == p.input_dtype == torch.float64 and p.scaler is None
    assert p.label == "fp64"
    p = precision_setup("fp16", cpu)
    assert p.model_dtype == torch.float32 and p.scaler is None
    assert "bf16" in p.label and "CPU" in p.label and p.input_dtype == torch.bfloat16
    with p.autocast():
        y = torch.nn.Linear(4, 4)(torch.randn(2, 4))
    assert y.dtype == torch.bfloat16
    p = precision_setup("fp32", cpu)
    with p.autocast():
        assert torch.nn.Linear(4, 4)(torch.randn(2, 4)).dtype == torch.float32
    with pytest.raises(ValueError):
        precision_setup("fp8", cpu)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the fp16 GPU path needs CUDA")
def test_fp16_on_gpu_sends_half_inputs_with_autocast_and_scaler():
    p = precision_setup("fp16", torch.device("cuda", 0))
    assert p.input_dtype == torch.float16 and p.model_dtype == torch.float32
    assert p.scaler is not None and p.label == "fp16-autocast+gradscaler"


@pytest.mark.parametrize(
    "precision, dtype, nbytes",
    [("fp64", torch.float64, 8), ("fp32", torch.float32, 4), ("bf16", torch.bfloat16, 2)],
)
def test_batches_leave_the_loader_in_the_precisions_dtype(precision, dtype, nbytes):
    """The cast happens on the host, inside the transform, so pinned memory and the
    host-to-device copy carry the precision's bytes (FP64 twice FP32's, as in the paper)."""
    p = precision_setup(precision, torch.device("cpu"))
    tf = scenario_a_transform(32, p.input_dtype)
    from PIL import Image

    x = tf(Image.fromarray(np.zeros((28, 28), np.uint8)))
    assert x.dtype == dtype and x.shape == (3, 32, 32)
    assert x.element_size() * x.nelement() == nbytes * 3 * 32 * 32


def test_half_inputs_are_half_the_bytes_of_float():
    half = scenario_a_transform(16, torch.float16)
    single = scenario_a_transform(16, torch.float32)
    from PIL import Image

    img = Image.fromarray(np.full((28, 28), 200, np.uint8))
    a, b = half(img), single(img)
    assert a.dtype == torch.float16 and 2 * a.nbytes == b.nbytes
    assert torch.allclose(a.float(), b, atol=1e-2)


@pytest.mark.parametrize(
    "strategy, world", [("ddp", 2), ("ddp_rr", 2), ("ddp_rr", 3), ("ddp_ds", 2)]
)
def test_planned_steps_match_the_batches_each_rank_trains(strategy, world):
    spec = {
        **vision_spec.DEFAULTS,
        "strategy": strategy,
        "gpus": world,
        "train_images": N,
        "batch_size": BS,
        "epochs": 2,
    }
    for rank in range(world):
        one_epoch = len(rank_batches(strategy, N, BS, world, rank))
        assert vision_spec.planned_steps(spec, rank) == 2 * one_epoch


def test_only_round_robin_is_wrapped_in_join():
    """DDP and DDP-DS add no collective per step; the Join context appears once in the loop,
    guarded by the round-robin strategy (read from the source, as the loop needs ranks)."""
    import inspect

    from run.vision import loop

    src = inspect.getsource(loop.epoch_steps)
    assert src.count("Join([ddp])") == 1
    assert "Join([ddp]) if round_robin else contextlib.nullcontext()" in src
    assert "float(loss" not in src.split("for i, (x, y)")[1].split("prof.step()")[0]


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


def test_a_digits_set_of_another_version_is_made_again(tmp_path):
    raw = digits.generate(tmp_path, 40, 10, seed=3)
    assert digits.written_version(tmp_path) == str(digits.VERSION)
    made = (raw / "train-images-idx3-ubyte").stat().st_mtime_ns
    digits.generate(tmp_path, 20, 10, seed=3)  # this version, large enough: kept as it is
    assert (raw / "train-images-idx3-ubyte").stat().st_mtime_ns == made
    (raw / digits.VERSION_FILE).unlink()  # a set written before the marker existed (version 1)
    digits.generate(tmp_path, 20, 10, seed=3)
    assert digits.written_version(tmp_path) == str(digits.VERSION)
    assert digits.existing_counts(tmp_path) == {"train": 20, "test": 10}


@pytest.mark.parametrize("width", [0, -0.5, True, "0.5", None])
def test_width_mult_must_be_a_positive_number(width):
    with pytest.raises(ValueError, match="width_mult="):
        vision_spec.validate({**vision_spec.DEFAULTS, "width_mult": width})


def test_width_mult_is_named_only_when_not_the_full_model():
    full = vision_spec.run_name(vision_spec.DEFAULTS)
    assert "-w" not in full.split("-nopin")[1]
    narrow = vision_spec.run_name({**vision_spec.DEFAULTS, "width_mult": 0.25})
    assert narrow == full + "-w0.25"
    model = import_torchvision().models.mobilenet_v2(num_classes=10, width_mult=0.25)
    assert model.features[0][0].out_channels == 8  # torchvision honours the multiplier


def test_missing_and_corrupt_mnist_are_reported(tmp_path, monkeypatch):
    monkeypatch.setenv("MNIST_DIR", str(tmp_path / "absent"))
    spec = {"dataset": "mnist", "train_images": 10, "test_images": 10}
    with pytest.raises(FileNotFoundError, match="MNIST not found"):
        vision_launch.preflight([spec])
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
        vision_launch.preflight([spec])


def test_dali_runs_without_dali_installed_are_one_clear_error(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "nvidia.dali", None)  # import nvidia.dali -> ImportError
    monkeypatch.setenv("DIGITS_DIR", str(tmp_path / "digits"))
    spec = {"dataset": "digits", "loader": "dali", "train_images": 8, "test_images": 8}
    with pytest.raises(FileNotFoundError, match="need NVIDIA DALI, which is not installed"):
        vision_launch.preflight([spec])
    assert not (tmp_path / "digits").exists()  # refused before any data set is made


# --- issue 20: the optimisation keys, their names, checks and the device-side upsampling ---------
OPTIMISED = {"upsample": "device", "fused_optimizer": True, "compile": True, "host_sync": "epoch"}


def test_optimisation_keys_default_to_the_faithful_loop_and_name_themselves():
    base = vision_spec.run_name(vision_spec.DEFAULTS)
    assert not {"updev", "fused", "compile", "sync_epoch"} & set(base.split("-"))
    parts = {"upsample": "updev", "fused_optimizer": "fused", "compile": "compile",
             "host_sync": "sync_epoch"}  # fmt: skip
    for key, part in parts.items():
        spec = {**vision_spec.DEFAULTS, key: OPTIMISED[key]}
        vision_spec.validate(spec)
        assert vision_spec.run_name(spec) == f"{base}-{part}"
    every = vision_spec.run_name({**vision_spec.DEFAULTS, **OPTIMISED})
    assert every == f"{base}-updev-fused-compile-sync_epoch"


@pytest.mark.parametrize(
    "over, message",
    [
        ({"upsample": "gpu"}, "upsample='gpu' is not one of host, device"),
        ({"host_sync": "never"}, "host_sync='never' is not one of step, epoch"),
        ({"compile": "yes"}, "compile='yes' is not one of"),
        ({"fused_optimizer": 1.5}, "fused_optimizer=1.5 is not one of"),
        ({"upsample": "device", "scenario": "B"}, "upsample=device upsamples the stored 28x28"),
        ({"turbo": True}, "unknown vision spec key(s): turbo"),
    ],
)
def test_bad_optimisation_keys_are_one_line(over, message):
    with pytest.raises(ValueError) as err:
        vision_spec.validate({**vision_spec.DEFAULTS, **over})
    assert message in str(err.value) and "\n" not in str(err.value)


def test_fused_and_compiled_fp64_and_epoch_sync_everywhere_are_valid():
    """torch 2.13's fused Adam takes every floating dtype on cpu and cuda; inductor takes fp64."""
    for over in ({"precision": "fp64"}, {"scenario": "B", "loader": "dali"}, {"gpus": 4}):
        vision_spec.validate({**vision_spec.DEFAULTS, **OPTIMISED, "upsample": "host", **over})
    p = torch.nn.Parameter(torch.ones(3, dtype=torch.float64))
    p.grad = torch.ones_like(p)
    torch.optim.Adam([p], lr=0.1, fused=True).step()
    assert p.dtype == torch.float64 and float(p[0]) < 1


def test_unsupported_reasons(sandbox, monkeypatch):
    spec = {**vision_spec.DEFAULTS, **OPTIMISED, "precision": "bf16"}
    (sandbox / "results").mkdir()  # where a CPU keeps the compiler's answer (run/node/toolchain)
    toolchain.compile_blocker.cache_clear()  # an earlier test's answer would keep none here
    assert vision_spec.unsupported_reason(vision_spec.DEFAULTS) is None
    assert vision_spec.unsupported_reason(spec) is None  # this machine has g++ and Python.h
    import torch._inductor.cpp_builder as cpp_builder

    def no_compiler() -> str:
        raise RuntimeError("no g++")

    real = cpp_builder.get_cpp_compiler
    monkeypatch.setattr(cpp_builder, "get_cpp_compiler", no_compiler)
    toolchain.compile_blocker.cache_clear()  # as a new process would start
    try:
        # a new process keeps the answer its results folder holds while nothing it depends on
        # changed: the compiler is not asked again
        assert vision_spec.unsupported_reason(spec) is None
        # a new PATH folder: asked again
        bin_dir = sandbox / "bin"
        bin_dir.mkdir()
        monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
        toolchain.compile_blocker.cache_clear()
        reason = vision_spec.unsupported_reason(spec)
        assert "torch.compile needs a working C++ compiler" in reason
        assert vision_spec.unsupported_reason({**spec, "compile": False}) is None
        # a compiler installed into a PATH folder (its modification time moves on): asked again
        monkeypatch.setattr(cpp_builder, "get_cpp_compiler", real)
        toolchain.compile_blocker.cache_clear()
        assert "C++ compiler" in vision_spec.unsupported_reason(spec)  # still the kept answer
        later = bin_dir.stat().st_mtime_ns + 10**9
        os.utime(bin_dir, ns=(later, later))
        toolchain.compile_blocker.cache_clear()
        assert vision_spec.unsupported_reason(spec) is None
    finally:
        toolchain.compile_blocker.cache_clear()
    monkeypatch.setattr(toolchain, "gpu_nodes", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    # a V100 emulates bf16: torch's default (including_emulation=True) would say it has it
    monkeypatch.setattr(
        torch.cuda, "is_bf16_supported", lambda including_emulation=True: including_emulation
    )
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "Tesla V100")
    reason = vision_spec.unsupported_reason({**spec, "compile": False})
    assert reason == "bf16 autocast is not supported on Tesla V100"
    assert vision_spec.unsupported_reason({**spec, "compile": False, "precision": "fp32"}) is None


@pytest.fixture(scope="module")
def stored_digits(tmp_path_factory):
    """Eight stored 28x28 uint8 digits, as torchvision's MNIST holds them (.data)."""
    root = tmp_path_factory.mktemp("digits")
    digits.generate(root, 16, 8, seed=5)
    return import_torchvision().datasets.MNIST(str(root), train=True, download=False).data[:8]


@pytest.mark.parametrize("size", [48, 64, 20])
def test_device_upsampling_gives_the_host_transforms_inputs(stored_digits, size):
    """The same two-pass bilinear antialiased resize, 8-bit rounding, 3 channels and
    normalisation as the per-image PIL transform: equal, but for a few pixels that PIL's
    fixed-point weights round one level away (measured: 2.5 % at 48 px, 3 % at 20, none at 64)."""
    from PIL import Image

    from run.vision.inputs import upsample_on_device

    tf = scenario_a_transform(size)
    host = torch.stack([tf(Image.fromarray(im.numpy(), mode="L")) for im in stored_digits])
    dev = upsample_on_device(stored_digits, size, torch.float32)
    assert dev.shape == host.shape == (8, 3, size, size) and dev.dtype == torch.float32
    one_level = 1 / 255 / 0.3081
    diff = (dev - host).abs()
    assert diff.max() <= one_level + 1e-5
    assert (diff > 1e-5).float().mean() < 0.05  # nearly every pixel identical
    assert host.std() > 0.5  # real digits, not a blank image that any path matches


def test_device_upsampling_casts_and_lays_out_as_asked(stored_digits):
    from run.vision.inputs import upsample_on_device

    x = upsample_on_device(stored_digits, 32, torch.bfloat16, torch.channels_last)
    assert x.dtype == torch.bfloat16 and x.is_contiguous(memory_format=torch.channels_last)
    y = upsample_on_device(stored_digits, 32, torch.float64)
    assert y.dtype == torch.float64 and y.is_contiguous()
    z = upsample_on_device(stored_digits, 32, torch.float32)  # the O1 device-upsample step's input
    assert z.dtype == torch.float32 and z.is_contiguous() and 0 not in z.stride()
    assert stored_digits[0].nbytes == 28 * 28  # what upsample=device copies per image


def test_device_upsampling_data_set_yields_the_stored_bytes(monkeypatch, tmp_path):
    from run.vision.inputs import data_sets

    digits.generate(tmp_path, 40, 10, seed=3)
    monkeypatch.setenv("DIGITS_DIR", str(tmp_path))
    spec = {**vision_spec.DEFAULTS, "train_images": 32, "test_images": 8, "upsample": "device"}
    train, test = data_sets(spec, torch.bfloat16)
    x, y = train[0]
    assert x.dtype == torch.uint8 and x.shape == (28, 28) and len(train) == 32 and len(test) == 8
    host_x, host_y = data_sets({**spec, "upsample": "host"}, torch.bfloat16)[0][0]
    assert host_x.dtype == torch.bfloat16 and host_x.shape == (3, 48, 48) and host_y == y


class Recorder:
    """A stand-in batch that records how it is copied."""

    def __init__(self) -> None:
        self.calls: list[dict] = []

    def to(self, device, **kw):  # noqa: ANN001
        self.calls.append(kw)
        return self


@pytest.mark.parametrize(
    "pin, sync, non_blocking",
    [(False, "step", False), (True, "step", True), (False, "epoch", True), (True, "epoch", True)],
)
def test_only_host_sync_epoch_makes_pageable_copies_non_blocking(pin, sync, non_blocking):
    from run.vision.inputs import to_device

    x, y = Recorder(), Recorder()
    spec = {**vision_spec.DEFAULTS, "pin_memory": pin, "host_sync": sync}
    to_device(x, y, torch.device("cpu"), spec, torch.float32)
    assert x.calls == y.calls == [{"non_blocking": non_blocking}]


def test_compile_seconds_are_the_compiling_steps_above_the_median():
    from run.vision.loop import compile_seconds

    assert compile_seconds([9.0, 1.0, 1.2, 0.8, 3.0], [True, False, False, False, True]) == (
        pytest.approx(8.0 + 2.0)
    )
    assert compile_seconds([1.0, 1.1], [False, False]) == 0.0
    assert compile_seconds([5.0], [True]) == 5.0  # nothing to compare with: the whole step
