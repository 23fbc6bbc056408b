"""NUMA binding (run/node/numa.py): the node per rank from sysfs, the auto/bind/off policy, and the
launch commands of both workloads with and without binding."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from run.errors import UserError
from run.llm import launch as llm_launch
from run.node import numa, provenance
from run.vision import launch as vision_launch
from run.vision import spec as vision_spec

REPO = Path(__file__).resolve().parent.parent
BUSES = ["00000000:1B:00.0", "00000000:43:00.0", "00000000:8A:00.0", "00000000:C3:00.0"]


@pytest.fixture
def two_sockets(tmp_path) -> dict:
    """A fake sysfs of 2 sockets x 2 GPUs (GPUs 0, 1 on node 0; 2, 3 on node 1) and its probe."""
    for bus, node in zip(BUSES, (0, 0, 1, 1), strict=True):
        d = tmp_path / "bus" / "pci" / "devices" / bus.lower()[-12:]
        d.mkdir(parents=True)
        (d / "numa_node").write_text(f"{node}\n")
    gpus = [{"index": i, "pci_bus_id": b, "numa_node": numa.gpu_node(b, tmp_path)}
            for i, b in enumerate(BUSES)]  # fmt: skip
    nodes = [{"node": 0, "cpus": "0-31"}, {"node": 1, "cpus": "32-63"}]
    return {"gpus": gpus, "numa_nodes": nodes, "gpu_count": 4}


def test_each_rank_is_bound_to_its_gpu_s_node(two_sockets, monkeypatch):
    monkeypatch.setenv("NUMA", "auto")
    p = numa.plan(4, two_sockets, numactl="/usr/bin/numactl")
    assert p["bound"] and [r["node"] for r in p["ranks"]] == [0, 0, 1, 1]
    assert p["ranks"][2]["cpus"] == "32-63"
    cmd = numa.wrap(
        ["torchrun", "--standalone", "--nproc_per_node=4", "-m", "run.vision", "--x"], p
    )
    i = cmd.index("--no-python")
    assert cmd[i + 1 :][:6] == [
        sys.executable,
        "-m",
        "run.node.numa",
        "exec",
        "--nodes=0,0,1,1",
        "--",
    ]
    assert cmd[-4:] == [sys.executable, "-m", "run.vision", "--x"]
    assert numa.bind_args(1) == ["numactl", "--cpunodebind=1", "--membind=1"]


def test_unknown_sysfs_node_falls_back_to_the_first_node(tmp_path):
    d = tmp_path / "bus" / "pci" / "devices" / "0000:1b:00.0"
    d.mkdir(parents=True)
    (d / "numa_node").write_text("-1\n")
    assert numa.gpu_node(BUSES[0], tmp_path) is None
    assert numa.gpu_node(BUSES[1], tmp_path) is None  # no such device


@pytest.mark.parametrize(
    "policy, numactl, nodes, bound, why",
    [
        ("auto", "/usr/bin/numactl", 2, True, "policy auto, 2 NUMA node(s)"),
        ("auto", "/usr/bin/numactl", 1, False, "one NUMA node: binding cannot change anything"),
        ("auto", "", 2, False, "numactl not installed"),
        ("off", "/usr/bin/numactl", 2, False, "policy off"),
        ("bind", "/usr/bin/numactl", 1, True, "policy bind, 1 NUMA node(s)"),
    ],
)
def test_auto_bind_off(monkeypatch, policy, numactl, nodes, bound, why):
    monkeypatch.setenv("NUMA", policy)
    info = {"gpus": [], "numa_nodes": [{"node": n, "cpus": ""} for n in range(nodes)]}
    p = numa.plan(2, info, numactl=numactl)
    assert (p["bound"], p["why"], p["policy"]) == (bound, why, policy)
    assert [r["node"] for r in p["ranks"]] == [0, 1 % nodes]  # gloo ranks spread over nodes


def test_bind_without_numactl_and_a_bad_value_are_one_clear_error(monkeypatch):
    monkeypatch.setenv("NUMA", "bind")
    with pytest.raises(UserError, match="numactl is not installed"):
        numa.plan(1, {}, numactl="")
    monkeypatch.setenv("NUMA", "sometimes")
    with pytest.raises(UserError, match="NUMA must be one of auto, bind, off, got 'sometimes'"):
        numa.plan(1, {})
    monkeypatch.setenv("NUMA", "off")
    assert numa.plan(1, {}, spec_numa="bind", numactl="/x")["bound"]  # V11's override wins


def test_both_workloads_launch_bound_or_plain(monkeypatch, two_sockets, tmp_path):
    monkeypatch.setattr(shutil, "which", lambda name: f"/usr/bin/{name}")
    spec = {**vision_spec.DEFAULTS, "gpus": 2}
    monkeypatch.setenv("NUMA", "off")
    plain = vision_launch.launch_command(spec, tmp_path, two_sockets)
    assert "run.node.numa" not in plain and "--no-python" not in plain
    monkeypatch.setenv("NUMA", "auto")
    bound = vision_launch.launch_command(spec, tmp_path, two_sockets)
    assert "--nodes=0,0" in bound and bound[-4:] == ["--spec", str(tmp_path / "spec.json"),
                                                   "--run-dir", str(tmp_path)]  # fmt: skip
    llm = llm_launch.launch_command({**llm_spec_defaults(), "gpus": 1}, tmp_path, two_sockets)
    assert llm[:3] == ["numactl", "--cpunodebind=0", "--membind=0"]
    prov = provenance.collect(spec, bound, two_sockets)
    assert prov["numa"]["bound"] and prov["numa"]["ranks"][1]["node"] == 0
    assert vision_spec.run_name({**spec, "numa": "bind"}).endswith("-numa_bind")
    assert "numa" not in vision_spec.run_name(spec)
    # what log.txt's first line says after the command, bound and plain
    assert numa.note(prov["numa"]) == "# NUMA=auto: bound, rank nodes 0,0"
    monkeypatch.setenv("NUMA", "off")
    assert numa.note(numa.plan(2, two_sockets)) == "# NUMA=off: not bound: policy off"


def llm_spec_defaults() -> dict:
    from run.sweep import matrix as mx

    return next(s for s in mx.expand("L1", "smoke").specs if s["gpus"] == 1)


@pytest.mark.skipif(shutil.which("numactl") is None, reason="numactl is not installed")
def test_the_exec_wrapper_runs_the_program_under_numactl():
    out = subprocess.run(
        [sys.executable, "-m", "run.node.numa", "exec", "--nodes=0", "--", sys.executable, "-c",
         "import os; print(sorted(os.sched_getaffinity(0)) != [])"],
        cwd=REPO, capture_output=True, text=True, env={"LOCAL_RANK": "0", "PATH": "/usr/bin:/bin"},
        check=True,
    )  # fmt: skip
    assert out.stdout.splitlines() == [
        "[numa] local_rank=0 node=0 numactl --cpunodebind=0 --membind=0",
        "True",
    ]
