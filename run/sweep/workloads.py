"""What the sweep asks of a workload, written down once, and the registry of workloads.

A workload is a folder of run/ (vision/, llm/) with `spec.py` (what a spec holds, its name, what
cannot run) and `launch.py` (what the sweep does before and to run it), presented as one by
`Workload`. The matrix, the plan, the sweep and gpu-check reach a workload only through this
interface. Adding a workload is one folder and one line in WORKLOADS (README, "Adding a workload").
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from run.llm import launch as llm_launch
from run.llm import spec as llm_spec
from run.vision import launch as vision_launch
from run.vision import spec as vision_spec

Spec = dict[str, Any]


class Workload:
    """A workload as the sweep sees it: its spec and launch modules, each member the module
    function of its name, looked up at each use (a test that replaces one, say launch_command
    with a fake run, replaces it for the sweep too). `info` is the machine as
    run.node.probe.probe() gives it. Nothing here may load torch when imported: analysis/ reads
    the matrix through it.
    """

    def __init__(self, name: str, spec_module: ModuleType, launch_module: ModuleType) -> None:
        self.name = name  # the matrix's `workload:` value, also every spec's `workload` key
        self.spec_module, self.launch_module = spec_module, launch_module
        self.defaults: Mapping[str, Any] = spec_module.DEFAULTS  # every key, its faithful value

    def validate(self, spec: Spec) -> None:
        """Raise ValueError naming the first key that is unknown, missing or out of range."""
        self.spec_module.validate(spec)

    def canonical(self, spec: Spec) -> Spec:
        """One spec per distinct piece of work (`auto`s resolved), so identical work shares a name."""
        return self.spec_module.canonical(spec)

    def run_name(self, spec: Spec) -> str:
        """The run's name, which spells its setup and is its results folder."""
        return self.spec_module.run_name(spec)

    def planned_steps(self, spec: Spec) -> int:
        """Optimizer steps rank 0 takes over the whole run, known before it starts."""
        return self.spec_module.planned_steps(spec)

    def unsupported_reason(self, spec: Spec) -> str | None:
        """Why this machine (or the software) cannot run the spec: recorded, never launched."""
        return self.spec_module.unsupported_reason(spec)

    def preflight(self, specs: list[Spec]) -> None:
        """Before any run: make or check every data set and asset the specs need; one-line error."""
        self.launch_module.preflight(specs)

    def skip_reason(self, spec: Spec, info: dict[str, Any]) -> str:
        """Why the sweep skips the cell on this machine ("" to run it); a skipped cell is no run."""
        return self.launch_module.skip_reason(spec, info)

    def launch_command(self, spec: Spec, run_dir: Path, info: dict[str, Any]) -> list[str]:
        """The command that runs the spec into run_dir (cwd: the checkout), printed in its log."""
        return self.launch_module.launch_command(spec, run_dir, info)


WORKLOADS: dict[str, Workload] = {
    "vision": Workload("vision", vision_spec, vision_launch),
    "llm": Workload("llm", llm_spec, llm_launch),
}
