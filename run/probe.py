"""Hardware probe: what this machine offers the experiments. Stored with every run.

python -m run.probe          # human-readable
python -m run.probe --json   # what provenance.json stores
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any


def _cmd(args: list[str], timeout: float = 10) -> str | None:
    if shutil.which(args[0]) is None:
        return None
    try:
        out = subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def numa_nodes() -> list[dict[str, Any]]:
    """NUMA nodes with their CPU lists, read from sysfs (works without numactl)."""
    nodes = []
    base = Path("/sys/devices/system/node")
    for d in sorted(base.glob("node[0-9]*"), key=lambda p: int(p.name[4:])):
        cpulist = (d / "cpulist").read_text().strip() if (d / "cpulist").exists() else ""
        nodes.append({"node": int(d.name[4:]), "cpus": cpulist})
    return nodes


def gpus() -> list[dict[str, Any]]:
    """CUDA GPUs as nvidia-smi sees them, with the NUMA node of each (for V11's binding)."""
    out = _cmd(
        [
            "nvidia-smi",
            "--query-gpu=index,name,memory.total,pci.bus_id,driver_version",
            "--format=csv,noheader,nounits",
        ]
    )
    found = []
    for line in (out or "").splitlines():
        idx, name, mem, bus, driver = [x.strip() for x in line.split(",")]
        numa = None
        sysfs = Path(f"/sys/bus/pci/devices/{bus.lower()[-12:]}/numa_node")
        if sysfs.exists():
            numa = int(sysfs.read_text().strip())
        found.append(
            {
                "index": int(idx),
                "name": name,
                "memory_mib": int(float(mem)),
                "pci_bus_id": bus,
                "driver": driver,
                "numa_node": numa,
            }
        )
    return found


def probe() -> dict[str, Any]:
    gpu_list = gpus()
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
        "gpus": gpu_list,
        "gpu_count": len(gpu_list),
        "gpu_model": gpu_list[0]["name"] if gpu_list else None,
        "gpu_topology": _cmd(["nvidia-smi", "topo", "-m"]) if gpu_list else None,
        "numactl": shutil.which("numactl"),
        # the NUMA distance matrix and memory per node, as numactl itself reports them
        "numactl_hardware": _cmd(["numactl", "--hardware"]),
        "nsys": shutil.which("nsys"),
        "nsys_version": _cmd(["nsys", "--version"]),
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
    }


def torchrun() -> list[str]:
    """How to start torchrun with this Python: the venv's script, else the module."""
    script = Path(sys.executable).with_name("torchrun")
    return [str(script)] if script.exists() else [sys.executable, "-m", "torch.distributed.run"]


def default_profile(info: dict[str, Any] | None = None) -> str:
    info = info or probe()
    return "paper" if info["gpu_count"] else "smoke"


def max_ranks(info: dict[str, Any]) -> int:
    """How many ranks a run may use: GPUs on a GPU node, CPU cores for gloo ranks otherwise."""
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
    else:
        lines.append("gpu         none visible: experiments run on CPU with gloo ranks")
    lines.append(f"numactl     {info['numactl'] or 'not found'}")
    nsys = f"{info['nsys']} ({info['nsys_version']})" if info["nsys"] else None
    lines.append(f"nsys        {nsys or 'not found: torch.profiler is the fallback'}")
    lines.append(f"max ranks   {max_ranks(info)}")
    lines.append(f"profile     default PROFILE={default_profile(info)}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Print what hardware the experiments can use.")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    info = probe()
    print(json.dumps(info, indent=2) if args.json else describe(info))
    return 0


if __name__ == "__main__":
    sys.exit(main())
