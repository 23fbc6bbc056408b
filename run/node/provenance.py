"""Provenance stored beside every result: code version, library versions, hardware, command."""

from __future__ import annotations

import datetime as dt
from importlib import metadata
from typing import Any

from run import settings, store
from run.node import probe

REPO = store.REPO  # tests point it at a copy without .git
PACKAGES = (
    "torch",
    "torchvision",
    "torchtune",
    "torchao",
    "torchdata",
    "nvidia-dali-cuda130",  # the flavour requirements.txt pins; a cu12x torch gets cuda120
    "nvidia-dali-cuda120",
    "bitsandbytes",
    "numpy",
    "pandas",
)


def git_state() -> dict[str, Any]:
    sha = probe._cmd(["git", "rev-parse", "HEAD"], REPO)
    image = settings.given_by_host(settings.IMAGE_SHA)
    if sha is None and image:
        # code copied out of the image (container/run-make.sh): no .git, the image's build SHA
        return {"sha": image, "dirty": None, "from": "container image"}
    dirty = probe._cmd(["git", "status", "--porcelain", "--untracked-files=no"], REPO)
    return {"sha": sha, "dirty": bool(dirty) if dirty is not None else None}


def versions() -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for pkg in PACKAGES:
        try:
            found[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            found[pkg] = None
    return found


def torch_build() -> dict[str, Any]:
    """CUDA and NCCL versions as torch was built with them (imported lazily: it is slow)."""
    import torch

    nccl = None
    if torch.cuda.is_available():
        try:
            nccl = ".".join(map(str, torch.cuda.nccl.version()))
        except Exception:  # noqa: BLE001 - NCCL may be absent from a build; record that as None
            nccl = None
    return {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "nccl": nccl,
        "cuda_available": torch.cuda.is_available(),
    }


def collect(spec: dict[str, Any], command: list[str], hardware: dict[str, Any]) -> dict[str, Any]:
    from run.node import numa, threads

    return {
        # the NUMA policy in force, whether the ranks were bound and each rank's node
        "numa": numa.plan(spec.get("gpus", 1), hardware, spec.get("numa")) if command else None,
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "git": git_state(),
        "versions": versions(),
        "hardware": hardware,
        # without a GPU each rank's share of the machine (run/node/threads.py); the run's summary
        # records what it applied
        "cpu_threads_per_rank": None if hardware.get("gpu_count") else threads.per_rank(),
        "command": command,
        "spec": spec,
    }
