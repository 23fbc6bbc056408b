"""Hardware probe: what this machine offers the experiments. Stored with every run.

python -m run.node.probe [--json]     # human-readable, or what provenance.json stores
python -m run.node.probe --check-cuda # exit 2 with one line when GPUs exist that torch cannot use

GPUs are those this process may use (CUDA_VISIBLE_DEVICES, capped by SLURM_GPUS_ON_NODE), so cells
needing more GPUs than the job was given are skipped, never failed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from run import settings
from run.errors import UserError
from run.node.numa import gpu_node
from run.program import program

# Which torch 2.13 build a driver runs, by its major version, newest first (NVIDIA's CUDA
# Compatibility guide, "CUDA Toolkit 11.x, 12.x, and 13.x Driver Version Ranges"): CUDA 13.x needs
# 580+ (13.0 GA ships 580.65.06); 12.8 GA ships 570.26; any 12.x runs on 525+ by minor-version
# compatibility (no PTX JIT: torch's wheels carry SASS). cu12x from PyTorch's index, cu130 PyPI's.
TORCH_BUILDS = (("cu130", 580), ("cu128", 570), ("cu126", 525))
# The same for the "CUDA Version" nvidia-smi prints, when the driver version is unknown.
CUDA_BUILDS = (("cu130", (13, 0)), ("cu128", (12, 8)), ("cu126", (12, 0)))
GPU_FIELDS = ("index", "name", "memory_mib", "pci_bus_id", "driver", "uuid")
WHEEL_INDEX = "https://download.pytorch.org/whl/"
README = "README: 'GPU nodes and drivers'"

# What the image build got when it tried to install nsys (container/setup-image.sh)
IMAGE_NSYS = Path("/etc/artifact/nsys")


class CudaUnusable(UserError):
    """nvidia-smi lists GPUs but the installed torch cannot use them."""


def _cmd(args: list[str], cwd: Path | None = None) -> str | None:
    if shutil.which(args[0]) is None:
        return None
    try:
        out = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip() or None
    except OSError:
        return None


def numa_nodes() -> list[dict[str, Any]]:
    nodes = []
    base = Path("/sys/devices/system/node")
    for d in sorted(base.glob("node[0-9]*"), key=lambda p: int(p.name[4:])):
        cpulist = (d / "cpulist").read_text().strip() if (d / "cpulist").exists() else ""
        nodes.append({"node": int(d.name[4:]), "cpus": cpulist})
    return nodes


def gpus() -> list[dict[str, Any]]:
    """Every GPU nvidia-smi sees (whatever CUDA_VISIBLE_DEVICES says)."""
    query = "--query-gpu=index,name,memory.total,pci.bus_id,driver_version,uuid"
    out = _cmd(["nvidia-smi", query, "--format=csv,noheader,nounits"])
    found = []
    for line in (out or "").splitlines():
        fields = [x.strip() for x in line.split(",")]
        if len(fields) < 6:
            continue
        g = dict(zip(GPU_FIELDS, fields[:6], strict=True))
        g["index"], g["memory_mib"] = int(g["index"]), int(float(g["memory_mib"]))
        found.append({**g, "numa_node": gpu_node(g["pci_bus_id"])})
    return found


def visible(all_gpus: list[dict[str, Any]], env: dict[str, str] | None = None) -> list[dict]:
    """The GPUs a CUDA process started with this environment may use: as in CUDA, the first
    CUDA_VISIBLE_DEVICES entry (index or UUID prefix) that matches nothing ends the list."""
    env = dict(os.environ if env is None else env)
    out = list(all_gpus)
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    if cvd is not None:
        out = []
        for item in (x.strip() for x in cvd.split(",")):
            match = None
            if item.isdigit():
                match = next((g for g in all_gpus if g["index"] == int(item)), None)
            elif item:
                match = next((g for g in all_gpus if g.get("uuid", "").startswith(item)), None)
            if match is None or match in out:
                break
            out.append(match)
    slurm = env.get("SLURM_GPUS_ON_NODE", "")
    if slurm.isdigit():
        out = out[: int(slurm)]
    return out


def driver_cuda() -> str | None:
    out = _cmd(["nvidia-smi"])
    found = re.search(r"CUDA Version:\s*([\d.]+)", out or "")
    return found.group(1) if found else None


def _version(v: str | None) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v or ""))[:2]


def cuda_problem(info: dict[str, Any], torch_cuda: dict[str, Any] | None = None) -> str | None:
    """One line when nvidia-smi lists GPUs for this process but torch cannot use them, else None;
    `torch_cuda` is {version, cuda, available} of the installed torch (read when not given)."""
    if not info.get("gpu_count"):
        return None
    if torch_cuda is None:
        import torch

        torch_cuda = {
            "version": torch.__version__,
            "cuda": torch.version.cuda,
            "available": torch.cuda.is_available(),
        }
    if torch_cuda["available"]:
        return None
    n, model = info["gpu_count"], info.get("gpu_model")
    driver = info["gpus"][0].get("driver") if info.get("gpus") else None
    drv = f"driver {driver or '?'}, which supports CUDA up to {info.get('driver_cuda') or '?'}"
    if not torch_cuda["cuda"]:
        what = f"torch {torch_cuda['version']} is a CPU build"
    elif info.get("driver_cuda") and _version(torch_cuda["cuda"]) > _version(info["driver_cuda"]):
        what = (
            f"torch {torch_cuda['version']} is built for CUDA {torch_cuda['cuda']}, newer than it"
        )
    else:
        what = (
            f"torch {torch_cuda['version']} (CUDA {torch_cuda['cuda']}) cannot initialise CUDA "
            "(torch.cuda.is_available() is False)"
        )
    return f"nvidia-smi lists {n} x {model} ({drv}) but {what}: {build_advice(driver, info, torch_cuda['cuda'])}"


def torch_build_for(driver: str | None, driver_cuda: str | None) -> str | None:
    """The newest torch build the driver runs ("cu130", "cu128", "cu126"), "" when the driver is
    too old for any, None when neither the driver nor its CUDA version is known."""
    major = _version(driver)[:1]
    if major:
        return next((b for b, least in TORCH_BUILDS if major[0] >= least), "")
    cuda = _version(driver_cuda)
    if cuda:
        return next((b for b, least in CUDA_BUILDS if cuda >= least), "")
    return None


def build_advice(driver: str | None, info: dict[str, Any], torch_cuda: str | None = None) -> str:
    build = torch_build_for(driver, info.get("driver_cuda"))
    if build and torch_cuda and build == "cu" + "".join(map(str, _version(torch_cuda))):
        return (
            f"torch's {build} build is the one this driver runs: look at the GPUs' state "
            "(nvidia-smi, /dev/nvidia* permissions, CUDA_VISIBLE_DEVICES)"
        )
    builds = ", ".join(f"{b} (driver {least}+)" for b, least in TORCH_BUILDS)
    if build is None:
        return (
            f"rebuild the environment with the torch build this driver supports, one of {builds}: "
            f"`make venv TORCH_INDEX={WHEEL_INDEX}cu126` for example ({README}), or update the "
            "NVIDIA driver"
        )
    if not build:
        return (
            f"this driver is too old for torch 2.13, whose CUDA builds are {builds}: update the "
            f"NVIDIA driver ({README})"
        )
    if build == "cu130":
        return (
            "this driver runs PyPI's torch (CUDA 13): rebuild the environment with "
            f"`make venv TORCH_INDEX=` or `make venv TORCH_INDEX={WHEEL_INDEX}cu130` ({README})"
        )
    return (
        f"this driver runs the {build} build: rebuild the environment with "
        f"`make venv TORCH_INDEX={WHEEL_INDEX}{build}` ({README}), or update the NVIDIA driver to "
        "580+ for PyPI's CUDA 13 torch"
    )


def check_cuda(info: dict[str, Any] | None = None) -> None:
    """Raise CudaUnusable when this node has GPUs torch cannot use. Every rank calls it: without
    `info` it asks torch first and nvidia-smi only when torch has no CUDA."""
    if info is None:
        import torch

        if torch.cuda.is_available():
            return
        info = gpu_info()
    problem = cuda_problem(info)
    if problem:
        raise CudaUnusable(problem)


def gpu_info() -> dict[str, Any]:
    every_gpu = gpus()
    gpu_list = visible(every_gpu)
    return {
        "gpus": gpu_list,
        "gpu_count": len(gpu_list),
        "gpu_model": gpu_list[0]["name"] if gpu_list else None,
        "gpus_on_node": len(every_gpu),
        "driver_cuda": driver_cuda() if every_gpu else None,
    }


def probe() -> dict[str, Any]:
    gpu = gpu_info()
    gpu_list = gpu["gpus"]
    cpu_model = ""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    return {
        "hostname": platform.node(),
        "os": platform.platform(),
        "python": sys.version.split()[0],
        "cpu_model": cpu_model,
        "cpu_count": os.cpu_count(),
        "affinity_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "numa_nodes": numa_nodes(),
        **gpu,
        "cuda_visible_devices": settings.given_by_host("CUDA_VISIBLE_DEVICES"),
        "slurm_gpus_on_node": settings.given_by_host("SLURM_GPUS_ON_NODE"),
        "gpu_topology": _cmd(["nvidia-smi", "topo", "-m"]) if gpu_list else None,
        "numactl": shutil.which("numactl"),
        # the NUMA distance matrix and memory per node, as numactl itself reports them
        "numactl_hardware": _cmd(["numactl", "--hardware"]),
        "nsys": shutil.which("nsys"),
        "nsys_version": _cmd(["nsys", "--version"]),
        "image_nsys": _read(IMAGE_NSYS),
        "slurm_job_id": settings.given_by_host("SLURM_JOB_ID"),
    }


def torchrun() -> list[str]:
    script = Path(sys.executable).with_name("torchrun")
    return [str(script)] if script.exists() else [sys.executable, "-m", "torch.distributed.run"]


def default_scale(info: dict[str, Any] | None = None) -> str:
    info = info or probe()
    return "paper" if info["gpu_count"] else "smoke"


def max_ranks(info: dict[str, Any]) -> int:
    if info["gpu_count"]:
        return info["gpu_count"]
    return info["affinity_cpus"] or info["cpu_count"] or 1


def describe(info: dict[str, Any]) -> str:
    lines = [f"host        {info['hostname']} ({info['os']})"]
    lines.append(f"cpu         {info['cpu_count']} x {info['cpu_model'] or 'unknown'}")
    numa = info["numa_nodes"]
    lines.append(
        f"numa        {len(numa)} node(s): "
        + "; ".join(f"{n['node']}: cpus {n['cpus']}" for n in numa)
    )
    if info["gpus"]:
        for g in info["gpus"]:
            lines.append(
                f"gpu {g['index']}       {g['name']} {g['memory_mib']} MiB, numa node {g['numa_node']}"
            )
        hidden = info.get("gpus_on_node", 0) - len(info["gpus"])
        if hidden > 0:
            lines.append(
                f"            {hidden} more on the node, hidden by CUDA_VISIBLE_DEVICES / SLURM"
            )
        lines.append(f"driver      CUDA up to {info.get('driver_cuda') or '?'}")
    elif info.get("gpus_on_node"):
        lines.append(
            f"gpu         {info['gpus_on_node']} on the node, none visible to this job "
            f"(CUDA_VISIBLE_DEVICES={info.get('cuda_visible_devices')!r})"
        )
    else:
        lines.append("gpu         none visible: experiments run on CPU with gloo ranks")
    lines.append(f"numactl     {info['numactl'] or 'not found'}")
    nsys = f"{info['nsys']} ({info['nsys_version']})" if info["nsys"] else None
    if not nsys and info.get("image_nsys"):
        nsys = f"not in this image ({info['image_nsys']}): torch.profiler is the fallback"
    lines.append(f"nsys        {nsys or 'not found: torch.profiler is the fallback'}")
    lines.append(f"max ranks   {max_ranks(info)}")
    lines.append(f"scale     default PROFILE={default_scale(info)}")
    return "\n".join(lines)


@program()
def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description="Print what hardware the experiments can use.")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--check-cuda", action="store_true", help="exit 2 if torch cannot use the GPUs")
    args = ap.parse_args(argv)
    info = probe()
    if args.check_cuda:
        check_cuda(info)
        return 0
    print(json.dumps(info, indent=2) if args.json else describe(info))
    problem = cuda_problem(info) if not args.json else None
    if problem:
        print(f"WARNING   {problem}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
