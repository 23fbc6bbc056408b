"""A run beside a busy core (issue 38): noise measured under a load the machine may meet.

Two sweeps of identical work on one machine, one beside other work, showed that a spread measured
in a quiet sweep does not bound the spread of a busy one (`make check-verdicts`, issue 38 item 6).
So the noise cells (experiments/matrix.yaml N1/N2, `busy_repeats`) run one more repeat of each
cell beside a known busy core, and analysis/noise.py counts it in the cell's set of identical work:
the margin every verdict must clear then covers a run beside a busy core.

The spec key `beside` (optional in every workload's spec: absent, or `none`, is a plain run) says
so, and the run name spells it (`-busy`), so that such a run is a results folder of its own. While
the run's command runs, the sweep (run/sweep/runner.py) keeps burners spinning on the CPU beside
it: each a Python loop doing nothing else, at the sweep's own priority (not niced), started just
before the command and stopped and reaped when it ends, fails, times out or is interrupted. Each
burner carries the attempt's tag and dies with the sweep (run/node/lifeline.py), so none outlives
the run. The run's provenance records how many, and the load they were sized to (`record`).

How many (`sized`). On CPU ranks (one compute thread each) a fixed single burner measured two
different loads: beside a 1-rank run on 2 cores it took the idle core and slowed nothing (a quiet
sweep's LLM 1-rank spread with it: 9.0 %), while in a sweep already beside a busy core it was a
second one (82 %: `make check-verdicts`, issue 38). So on a CPU the burners bring the machine to
one runnable process more than it has cores while the ranks run, counting the work already
running there (/proc/stat's procs_running, sampled before the command starts), and at least one
more than the sweep's own load where other work already makes it that busy. On a GPU
node a single burner takes one of many host cores: the run still measures something true (the
host-side work of the step beside one busy core) without starving its data loaders.
"""

from __future__ import annotations

import contextlib
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

from run.node import lifeline, probe

BESIDE = "beside"  # the spec key
NOTHING, BUSY_CORE = "none", "busy-core"
CHOICES = (NOTHING, BUSY_CORE)
NAME_PART = "busy"  # what the run name adds for a run beside a busy core
BURNERS = 1  # busy cores beside a run on a GPU node (and the cost model's estimate)
OVER_CORES = 1  # on a CPU: runnable processes beyond the cores while a busy run runs
SAMPLES, SAMPLE_GAP_S = 25, 0.02  # reads of procs_running before the command starts
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


def busy_cores(spec: dict[str, Any], ranks: int, n_cores: int) -> int:
    """Burners beside the spec's run on a quiet CPU (0 for a plain run): the cost model's
    (run/sweep/cost.py) ranks + burners on a CPU's cores."""
    return burners_for(ranks, n_cores, 0) if is_busy(spec) else 0


def name_parts(spec: dict[str, Any]) -> list[str]:
    """What the run name adds: `busy` beside a busy core, nothing for a plain run."""
    return [NAME_PART] if is_busy(spec) else []


def running_now() -> int:
    """Runnable processes on the machine besides this one: the median of SAMPLES reads of
    /proc/stat's procs_running (which counts this reader too); 0 where there is no /proc."""
    seen = []
    for i in range(SAMPLES):
        try:
            with open("/proc/stat") as fh:
                line = next(ln for ln in fh if ln.startswith("procs_running "))
        except (OSError, StopIteration):
            return 0
        seen.append(int(line.split()[1]) - 1)
        if i + 1 < SAMPLES:
            time.sleep(SAMPLE_GAP_S)
    return max(0, int(statistics.median(seen)))


def burners_for(ranks: int, n_cores: int, others: int) -> int:
    """Burners that make `ranks` plus `others` runnable processes OVER_CORES more than `n_cores`,
    and at least one: a sweep already at that load measures its run beside one busy core more
    (with none, its busy run matched its other runs and its margins missed a quiet machine's gap:
    `make check-verdicts` at 29bf50a)."""
    return max(1, n_cores + OVER_CORES - ranks - others)


def sized(
    spec: dict[str, Any], info: dict[str, Any], runs: bool = True
) -> tuple[int, dict[str, Any]]:
    """(burners to start beside the spec's run on the machine `info` (run.node.probe) describes,
    its provenance record): BURNERS on a GPU node, else sized to the load found now; none where
    no command `runs` (an unsupported spec)."""
    if not is_busy(spec) or not runs:
        return 0, {"busy_cores": 0}
    if info.get("gpu_count"):
        return BURNERS, record()
    others, n_cores = running_now(), probe.max_ranks(info)
    n = burners_for(int(spec.get("gpus", 1)), n_cores, others)
    return n, record(n, (others, n_cores))


def record(n: int = BURNERS, found: tuple[int, int] | None = None) -> dict[str, Any]:
    """What a busy run's provenance says of the load the sweep put beside it; `found` is (other
    runnable processes, cores) where the burners were sized to them."""
    others, n_cores = found or (None, None)
    sized = ("one burner (a GPU node)" if found is None else
             f"{others} other runnable process(es) found; {n} burner(s) bring the machine to at "
             f"least {OVER_CORES} more than its {n_cores} cores with the run's ranks")  # fmt: skip
    return {
        "busy_cores": n,
        "others_running": others,
        "sized": sized,
        "burner": burn_command(),
        "priority": "the sweep's own (not niced by the sweep)",
        "note": f"beside a busy core: {n} burner(s) spinning while the run's command ran",
    }


def note(spec: dict[str, Any], n: int = BURNERS) -> str:
    """What the run's first log line (and the sweep's output) adds for a run beside a busy core:
    a second line; nothing for a plain run."""
    if not is_busy(spec):
        return ""
    return (f"\n# beside a busy core: {n} burner(s) ({shlex.join(burn_command())}, "
            "at the sweep's priority), stopped with the run")  # fmt: skip


def start(env: dict[str, str], n: int = BURNERS) -> list[subprocess.Popen]:
    """Start `n` burners, with `env` (the attempt's tag) and tied to this process's life."""
    procs: list[subprocess.Popen] = []
    try:
        for _ in range(n):
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
def beside(n: int, env: dict[str, str]) -> Iterator[list[subprocess.Popen]]:
    """`n` burners (none for 0) spinning while the block runs: stopped and reaped
    when it ends, fails or is interrupted, a second Ctrl-C notwithstanding. The block stops its
    attempt's processes first (lifeline.stop, which finds the burners by their tag too)."""
    procs = start(env, n) if n else []
    try:
        yield procs
    finally:
        with lifeline.shielded():
            stop(procs)
