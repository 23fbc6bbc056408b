"""What a vision run spec may hold, how it is checked and named, and whether this machine can run
it (asked through run/sweep/workloads.py's Workload)."""

from __future__ import annotations

import math
from typing import Any

from run import settings
from run.node import busy, toolchain

STRATEGIES = ("ddp", "ddp_rr", "ddp_ds")
STRATEGY_LABELS = {"ddp": "DDP", "ddp_rr": "DDP-RR", "ddp_ds": "DDP-DS"}  # as the papers say
LOADER_LABELS = {"torch": "DataLoader", "dali": "DALI"}
PAPER_PRECISIONS = ("fp64", "fp32", "fp16")  # the papers' three, in Table 2's order
PRECISIONS = (*PAPER_PRECISIONS, "bf16")

DEFAULTS: dict[str, Any] = {
    "workload": "vision",
    "dataset": "digits",
    "scenario": "A",
    "train_images": 512,
    "test_images": 256,
    "epochs": 2,
    "batch_size": 32,
    "lr": 0.001,
    "num_workers": 0,
    "seed": 0,
    "image_size": 48,
    "width_mult": 1.0,  # torchvision's MobileNetV2 width multiplier: channels x width_mult
    "strategy": "ddp_ds",
    "precision": "fp32",
    "pin_memory": False,
    "channels_last": False,
    "loader": "torch",
    "numa": "policy",  # run/node/numa.py: the NUMA policy in force; V11 sets off or bind
    "gpus": 1,
    "profiler": "none",
    # Issue 20's optimisations (the defaults are the faithful loop, so faithful names stay):
    "upsample": "host",  # device: uint8 28x28 batches copied, upsampled on the device (A only)
    "fused_optimizer": False,  # Adam(fused=True)
    "compile": False,  # torch.compile of the DDP-wrapped model (inductor)
    "host_sync": "step",  # epoch: no host sync inside an epoch's steps
}

CHOICES: dict[str, tuple[Any, ...]] = {
    "workload": ("vision",),
    "dataset": ("digits", "mnist"),
    "scenario": ("A", "B"),
    "strategy": STRATEGIES,
    "precision": PRECISIONS,
    "pin_memory": (False, True),
    "channels_last": (False, True),
    "loader": ("torch", "dali"),
    "numa": ("policy", "off", "bind"),
    "profiler": settings.PROFILERS,
    "upsample": ("host", "device"),
    "fused_optimizer": (False, True),
    "compile": (False, True),
    "host_sync": ("step", "epoch"),
}
POSITIVE = ("train_images", "test_images", "epochs", "batch_size", "image_size", "gpus")
LEAST = {**dict.fromkeys(POSITIVE, 1), "seed": 0, "num_workers": 0}


def validate(spec: dict[str, Any]) -> None:
    busy.check_keys("vision", spec, DEFAULTS, CHOICES, LEAST, ("lr", "width_mult"))
    # Combinations that cannot run anywhere. fused Adam and torch.compile take fp64 too (torch
    # 2.13), and host_sync=epoch goes with everything, so they add no rule.
    if spec["upsample"] == "device" and spec["scenario"] != "A":
        raise ValueError(
            "upsample=device upsamples the stored 28x28 MNIST images on the device: Scenario A "
            f"only (scenario {spec['scenario']} reads images prepared at image_size)"
        )


def unsupported_reason(spec: dict[str, Any]) -> str | None:
    """What this machine cannot run: status "unsupported" with this reason, never launched."""
    # on a CPU bf16 autocast always runs (emulated if need be); including_emulation=False: timing
    # emulated bf16 (T4, V100) would not be the ladder's bf16 step (docs/gpu-review.md row 20)
    if spec.get("precision") == "bf16" and toolchain.cuda_available():
        import torch

        if not torch.cuda.is_bf16_supported(including_emulation=False):
            return f"bf16 autocast is not supported on {torch.cuda.get_device_name()}"
    if spec.get("compile"):
        return toolchain.compile_blocker()
    return None


def planned_steps(spec: dict[str, Any], rank: int = 0) -> int:
    """Optimizer steps rank `rank` takes over the run (ddp_ds: its padded shard's batches)."""
    n, world, bs = spec["train_images"], spec["gpus"], spec["batch_size"]
    if spec["strategy"] == "ddp_ds":
        per_epoch = math.ceil(math.ceil(n / world) / bs)
    else:
        batches = math.ceil(n / bs)
        per_epoch = batches if spec["strategy"] == "ddp" else len(range(rank, batches, world))
    return per_epoch * spec["epochs"]


def canonical(spec: dict[str, Any]) -> dict[str, Any]:
    """One spec per distinct piece of work: with one rank the three strategies do the same work,
    so the 1-GPU cell is one shared run, named ddp_ds, every strategy's baseline."""
    spec = dict(spec)
    if spec["gpus"] == 1:
        spec["strategy"] = "ddp_ds"
    return spec


def run_name(spec: dict[str, Any]) -> str:
    parts = [
        "mnv2",
        spec["precision"],
        spec["strategy"],
        f"{spec['gpus']}gpu",
        f"{spec['image_size']}px",
        "pin" if spec["pin_memory"] else "nopin",
        f"e{spec['epochs']}",
        f"n{spec['train_images']}",
    ]
    optional = (
        (spec["width_mult"] != 1, f"w{spec['width_mult']:g}"),
        (spec["scenario"] != "A", f"scen{spec['scenario']}"),
        (spec["loader"] != "torch", spec["loader"]),
        (spec["channels_last"], "nhwc"),
        (spec["upsample"] != "host", "updev"),
        (spec["fused_optimizer"], "fused"),
        (spec["compile"], "compile"),
        (spec["host_sync"] != "step", "sync_epoch"),
        (spec["numa"] != "policy", f"numa_{spec['numa']}"),
        (spec["profiler"] != "none", f"prof_{spec['profiler']}"),
        # a repeat's seed (run/sweep/matrix.py): the default adds nothing
        (spec.get("seed", DEFAULTS["seed"]) != DEFAULTS["seed"], f"seed{spec.get('seed')}"),
    )
    parts += [part for on, part in optional if on]
    parts += busy.name_parts(spec)
    return "-".join(parts)
