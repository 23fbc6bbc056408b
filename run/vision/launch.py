"""The vision workload as the sweep launches it: data made or checked first, cells this machine
must skip, the torchrun command."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from run.node import numa, profiling
from run.node.probe import torchrun


def preflight(specs: list[dict[str, Any]]) -> None:
    """Before any run starts: make the embedded data set, or insist the real one is there."""
    # numpy and PIL come with these: not imported by every reader of run names (run/sweep/left.py)
    from run.vision import digits, scenario_b

    if any(s.get("loader") == "dali" for s in specs):
        try:
            import nvidia.dali  # noqa: F401
        except ImportError:
            raise FileNotFoundError(
                "loader=dali runs need NVIDIA DALI, which is not installed: pip install the "
                "nvidia-dali wheel whose CUDA major matches torch's (requirements.txt)"
            ) from None
    for dataset in sorted({s["dataset"] for s in specs}):
        need = [s for s in specs if s["dataset"] == dataset]
        n_train = max(s["train_images"] for s in need)
        n_test = max(s["test_images"] for s in need)
        root = digits.data_root(dataset)
        if dataset == "digits":
            digits.generate(root, max(n_train, 4096), max(n_test, 1024))
            continue
        try:
            have = digits.existing_counts(root)
        except ValueError as exc:
            raise FileNotFoundError(f"MNIST at {root} is corrupt: {exc}") from exc
        if have is None:
            raise FileNotFoundError(
                f"MNIST not found under {digits.raw_dir(root)}: run `make data-mnist` (needs the "
                "network) or point MNIST_DIR at a folder holding MNIST/raw/*-ubyte"
            )
        if have["train"] < n_train or have["test"] < n_test:
            raise FileNotFoundError(
                f"MNIST under {root} has {have['train']}/{have['test']} images, "
                f"runs need {n_train}/{n_test}"
            )
    for s in {scenario_b.for_spec(s): s for s in specs if s.get("scenario") == "B"}.values():
        scenario_b.prepare(digits.data_root(s["dataset"]), s["dataset"], s["image_size"],
                           s["train_images"], s["test_images"])  # fmt: skip


def skip_reason(spec: dict[str, Any], info: dict[str, Any]) -> str:
    """Why the sweep skips a cell on this machine ("" to run it): no numactl for numa=bind, or
    Scenario B's DataLoader ranks' unpacked sets do not fit in memory."""
    if spec.get("numa") == "bind" and not shutil.which("numactl"):
        return "numactl is not installed, so this run cannot be bound (Debian: apt-get install numactl)"
    if spec["scenario"] != "B":
        return ""
    import psutil

    from run.vision import scenario_b

    return scenario_b.memory_check(spec, psutil.virtual_memory().available)


def launch_command(spec: dict[str, Any], run_dir: Path, info: dict[str, Any]) -> list[str]:
    cmd = [*torchrun(), "--standalone", f"--nproc_per_node={spec['gpus']}", "-m", "run.vision"]
    cmd += ["--spec", str(run_dir / "spec.json"), "--run-dir", str(run_dir)]
    if spec["profiler"] == "nsys":
        cmd = profiling.with_nsys(cmd, run_dir, capture_api=True)
    return numa.wrap(cmd, numa.plan(spec["gpus"], info, spec["numa"]))
