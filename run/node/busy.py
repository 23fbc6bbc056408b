"""A run beside a busy core (issue 38): noise measured under a load the machine may meet.

Two sweeps of identical work on one machine, one beside other work, showed that a spread measured
in a quiet sweep does not bound the spread of a busy one (`make check-verdicts`, issue 38 item 6).
So the noise cells (experiments/matrix.yaml N1/N2, `busy_repeats`) run one more repeat of each
cell beside a known busy core, and analysis/noise.py counts it in the cell's set of identical work:
the margin every verdict must clear then covers a run beside a busy core.

The spec key `beside` (optional in every workload's spec: absent, or `none`, is a plain run) says
so, and the run name spells it (`-busy`), so that such a run is a results folder of its own. While
the run's command runs, the sweep (run/sweep/runner.py) keeps BURNERS processes spinning on the CPU
beside it: each a Python loop doing nothing else, at the sweep's own priority (not niced), started
just before the command and stopped and reaped when it ends, fails, times out or is interrupted.
Each burner carries the attempt's tag and dies with the sweep (run/node/lifeline.py), so none
outlives the run. The run's provenance records it (`record`).

On a GPU node a burner takes one of many host cores: the run still measures something true (the
host-side work of the step beside one busy core), only a smaller disturbance than on a 2-core CPU.
"""

from __future__ import annotations

import contextlib
import shlex
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

from run.node import lifeline

BESIDE = "beside"  # the spec key
NOTHING, BUSY_CORE = "none", "busy-core"
CHOICES = (NOTHING, BUSY_CORE)
NAME_PART = "busy"  # what the run name adds for a run beside a busy core
BURNERS = 1  # busy cores beside the run
BURN_CODE = "while True: pass"


def burn_command() -> list[str]:
    return [sys.executable, "-c", BURN_CODE]


def check(spec: dict[str, Any]) -> None:
    """Raise ValueError for a `beside` value that is not one of CHOICES (absent is `none`)."""
    value = spec.get(BESIDE, NOTHING)
    if value not in CHOICES:
        raise ValueError(f"{BESIDE}={value!r} is not one of {', '.join(CHOICES)}")


def is_busy(spec: dict[str, Any]) -> bool:
    """Whether the spec's run runs beside a busy core."""
    return spec.get(BESIDE, NOTHING) == BUSY_CORE


def busy_cores(spec: dict[str, Any]) -> int:
    """Cores the sweep keeps busy beside the spec's run (0 for a plain run): the cost model's
    (run/sweep/cost.py) ranks + burners on a CPU's cores."""
    return BURNERS if is_busy(spec) else 0


def name_parts(spec: dict[str, Any]) -> list[str]:
    """What the run name adds: `busy` beside a busy core, nothing for a plain run."""
    return [NAME_PART] if is_busy(spec) else []


def record(spec: dict[str, Any]) -> dict[str, Any]:
    """What the run's provenance says of the load the sweep put beside it."""
    if not is_busy(spec):
        return {"busy_cores": 0}
    return {
        "busy_cores": BURNERS,
        "burner": burn_command(),
        "priority": "the sweep's own (not niced by the sweep)",
        "note": f"beside a busy core: {BURNERS} burner(s) spinning while the run's command ran",
    }


def note(spec: dict[str, Any]) -> str:
    """What the run's first log line (and the sweep's output) adds for a run beside a busy core:
    a second line; nothing for a plain run."""
    if not is_busy(spec):
        return ""
    return (f"\n# beside a busy core: {BURNERS} burner(s) ({shlex.join(burn_command())}, "
            "at the sweep's priority), stopped with the run")  # fmt: skip


def start(env: dict[str, str]) -> list[subprocess.Popen]:
    """Start the burners, with `env` (the attempt's tag) and tied to this process's life."""
    procs: list[subprocess.Popen] = []
    try:
        for _ in range(BURNERS):
            procs.append(
                subprocess.Popen(
                    burn_command(),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    env=env,
                    preexec_fn=lifeline.tie_to_parent,
                )
            )
    except BaseException:
        stop(procs)
        raise
    return procs


def stop(procs: list[subprocess.Popen]) -> None:
    """Kill and reap every burner (a dead one is only reaped)."""
    for p in procs:
        if p.poll() is None:
            p.kill()
    for p in procs:
        p.wait()


@contextlib.contextmanager
def beside(busy_core: bool, env: dict[str, str]) -> Iterator[list[subprocess.Popen]]:
    """The burners (none unless `busy_core`) spinning while the block runs: stopped and reaped
    when it ends, fails or is interrupted, a second Ctrl-C notwithstanding. The block stops its
    attempt's processes first (lifeline.stop, which finds the burners by their tag too)."""
    procs = start(env) if busy_core else []
    try:
        yield procs
    finally:
        with lifeline.shielded():
            stop(procs)
