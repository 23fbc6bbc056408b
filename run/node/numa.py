"""NUMA binding of every rank (the design card's numactl; V11 varies it).

NUMA=auto (default: bind with numactl on a machine of several nodes), bind (no numactl: one line
before any run) or off; a vision spec may override it (`numa:`, in its run name). Local rank r
runs under `numactl --cpunodebind=N --membind=N`, N its GPU's node from sysfs (on a CPU: r mod
nodes), through `python -m run.node.numa exec --nodes N0,N1,... -- <program>`, which prints one
`[numa]` line and execs numactl outside nsys, so the profiler inherits the binding.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

from run import settings
from run.errors import UserError
from run.program import program


def policy(spec_numa: str | None = None) -> str:
    if spec_numa in ("bind", "off"):
        return spec_numa
    return settings.value("NUMA")


def gpu_node(bus_id: str, sysfs: Path = Path("/sys")) -> int | None:
    """The NUMA node of a GPU from its PCI bus id ('00000000:1B:00.0'); None where sysfs says -1
    or nothing."""
    path = sysfs / "bus" / "pci" / "devices" / bus_id.lower()[-12:] / "numa_node"
    try:
        node = int(path.read_text().strip())
    except (OSError, ValueError):
        return None
    return node if node >= 0 else None


def plan(ranks: int, info: dict[str, Any], spec_numa: str | None = None,
         numactl: str | None = None) -> dict[str, Any]:  # fmt: skip
    """Whether the ranks are bound and to which node, with the reason (for provenance)."""
    want = policy(spec_numa)
    numactl = numactl if numactl is not None else (shutil.which("numactl") or "")
    nodes = [n["node"] for n in info.get("numa_nodes") or []] or [0]
    gpus = info.get("gpus") or []
    cpus = {n["node"]: n.get("cpus", "") for n in info.get("numa_nodes") or []}
    per_rank = []
    for r in range(ranks):
        gpu = gpus[r % len(gpus)] if gpus else {}
        node = gpu.get("numa_node") if gpus else nodes[r % len(nodes)]
        node = node if node is not None and node >= 0 else nodes[0]
        index = gpu.get("index", r) if gpus else None
        per_rank.append({"local_rank": r, "gpu": index, "node": node, "cpus": cpus.get(node, "")})
    if want == "off":
        bound, why = False, "policy off"
    elif not numactl:
        if want == "bind":
            raise UserError("NUMA binding was asked for (NUMA=bind or a numa: bind run) but "
                            "numactl is not installed (Debian: apt-get install numactl)")  # fmt: skip
        bound, why = False, "numactl not installed"
    elif want == "auto" and len(nodes) < 2:
        bound, why = False, "one NUMA node: binding cannot change anything"
    else:
        bound, why = True, f"policy {want}, {len(nodes)} NUMA node(s)"
    return {"policy": want, "bound": bound, "why": why, "numactl": numactl or None,
            "ranks": per_rank}  # fmt: skip


def note(p: dict[str, Any]) -> str:
    """The plan as a shell comment for log.txt's first line, after the launch command."""
    nodes = ",".join(str(r["node"]) for r in p["ranks"])
    state = f"bound, rank nodes {nodes}" if p["bound"] else f"not bound: {p['why']}"
    return f"# NUMA={p['policy']}: {state}"


def bind_args(node: int) -> list[str]:
    return ["numactl", f"--cpunodebind={node}", f"--membind={node}"]


def wrap(cmd: list[str], p: dict[str, Any]) -> list[str]:
    if not p["bound"]:
        return cmd
    nodes = ",".join(str(r["node"]) for r in p["ranks"])
    exec_ = [sys.executable, "-m", "run.node.numa", "exec", f"--nodes={nodes}", "--"]
    for i, arg in enumerate(cmd):
        if arg == "--no-python":  # torchrun already runs a program per rank (nsys): go around it
            return [*cmd[: i + 1], *exec_, *cmd[i + 1 :]]
        if arg.startswith("--nproc_per_node"):
            cut = i + 1 if "=" in arg else i + 2
            rest = cmd[cut:]
            prog = [sys.executable, *rest] if rest[:1] == ["-m"] else rest
            return [*cmd[:cut], "--no-python", *exec_, *prog]
    return [*bind_args(p["ranks"][0]["node"]), *cmd]  # one process, no torchrun


@program()
def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[0] != "exec" or not argv[1].startswith("--nodes=") or "--" not in argv:
        print(
            "usage: python -m run.node.numa exec --nodes=N0,N1,... -- program args", file=sys.stderr
        )
        return 2
    nodes = [int(x) for x in argv[1].split("=", 1)[1].split(",")]
    prog = argv[argv.index("--") + 1 :]
    rank = settings.local_rank()
    cmd = [*bind_args(nodes[rank % len(nodes)]), *prog]
    line = f"[numa] local_rank={rank} node={nodes[rank % len(nodes)]} {' '.join(cmd[:3])}\n"
    os.write(1, line.encode())  # one write: the ranks' lines do not interleave in the log
    os.execvp(cmd[0], cmd)
    return 1  # not reached


if __name__ == "__main__":
    sys.exit(main())
