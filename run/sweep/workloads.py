"""What the sweep asks of a workload, written down once, and the registry of workloads.

A workload is a folder of run/ (vision/, llm/) with `spec.py` (what a spec holds, its name, what
cannot run) and `launch.py` (what the sweep does before and to run it), presented as one by
`FromModules`. The matrix, the plan, the sweep and gpu-check reach a workload only through this
interface. Adding a workload is one folder and one line in WORKLOADS (README, "Adding a workload").
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol, runtime_checkable

from run.llm import launch as llm_launch
from run.llm import spec as llm_spec
from run.vision import launch as vision_launch
from run.vision import spec as vision_spec

Spec = dict[str, Any]


@runtime_checkable
class Workload(Protocol):
    """A workload as the sweep sees it. `info` is the machine as run.node.probe.probe() gives it.

    Nothing here may load torch when imported: analysis/ reads the matrix through it.
    """

    name: str  # the matrix's `workload:` value, also every spec's `workload` key
    defaults: Mapping[str, Any]  # every key a spec holds, with its faithful value

    def validate(self, spec: Spec) -> None:
        """Raise ValueError naming the first key that is unknown, missing or out of range."""
        ...

    def canonical(self, spec: Spec) -> Spec:
        """One spec per distinct piece of work (`auto`s resolved), so identical work shares a name."""
        ...

    def run_name(self, spec: Spec) -> str:
        """The run's name, which spells its setup and is its results folder."""
        ...

    def planned_steps(self, spec: Spec) -> int:
        """Optimizer steps rank 0 takes over the whole run, known before it starts."""
        ...

    def unsupported_reason(self, spec: Spec) -> str | None:
        """Why this machine (or the software) cannot run the spec: recorded, never launched."""
        ...

    def preflight(self, specs: list[Spec]) -> None:
        """Before any run: make or check every data set and asset the specs need; one-line error."""
        ...

    def skip_reason(self, spec: Spec, info: dict[str, Any]) -> str:
        """Why the sweep skips the cell on this machine ("" to run it); a skipped cell is no run."""
        ...

    def launch_command(self, spec: Spec, run_dir: Path, info: dict[str, Any]) -> list[str]:
        """The command that runs the spec into run_dir (cwd: the checkout), printed in its log."""
        ...


class FromModules:
    """A workload given as its spec and launch modules: `defaults` is spec.DEFAULTS, each member
    the module function of its name, looked up at each use (a test that replaces one, say
    launch_command with a fake run, replaces it for the sweep too)."""

    SPEC_MEMBERS = ("validate", "canonical", "run_name", "unsupported_reason")
    LAUNCH_MEMBERS = ("preflight", "skip_reason", "launch_command")

    def __init__(self, name: str, spec_module: ModuleType, launch_module: ModuleType) -> None:
        self.name = name
        self.spec_module = spec_module
        self.launch_module = launch_module
        self.defaults: Mapping[str, Any] = spec_module.DEFAULTS

    def __getattr__(self, member: str) -> Any:
        if member in self.SPEC_MEMBERS:
            return getattr(self.spec_module, member)
        if member in self.LAUNCH_MEMBERS:
            return getattr(self.launch_module, member)
        raise AttributeError(member)

    def planned_steps(self, spec: Spec) -> int:  # rank 0's: vision's function takes a rank too
        return self.spec_module.planned_steps(spec)


WORKLOADS: dict[str, Workload] = {
    "vision": FromModules("vision", vision_spec, vision_launch),
    "llm": FromModules("llm", llm_spec, llm_launch),
}
