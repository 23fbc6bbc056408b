"""A run beside a busy core (issue 38): noise measured under a load the machine may meet.

A spread measured in a quiet sweep did not bound a busy one's (`make check-verdicts`, issue 38
item 6), so the noise cells (matrix N1/N2, `busy_repeats`) run one more repeat of each cell beside
busy cores and analysis/noise.py counts it with the cell. The spec key `beside` (absent or `none`:
a plain run) says so and the run name spells it (`-busy`). The sweep (run/sweep/runner.py) keeps
burners (Python loops, not niced, tagged with the attempt, run/node/lifeline.py) spinning while
the run's command runs.

How many (`sized`): one fixed burner on CPU ranks measured two loads: beside a 1-rank run on 2
cores it took the idle core (LLM 1-rank spread 9.0 %), in a sweep already beside a busy core it
was a second one (82 %). So on a CPU the burners bring the machine to one runnable process more
than it has cores (counting /proc/stat's procs_running before the command), and at least one. On
a GPU node one burner takes one of many host cores without starving the data loaders.
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


def check_keys(kind: str, spec: dict[str, Any], defaults: dict[str, Any],
               choices: dict[str, tuple[Any, ...]], least: dict[str, int],
               numbers: tuple[str, ...]) -> None:  # fmt: skip
    """A workload spec's shared checks (its keys, `beside`, choices, integers of at least
    `least[key]`, positive numbers): ValueError naming the first key that fails."""
    unknown = set(spec) - set(defaults) - {BESIDE}  # `beside` is optional: absent, a plain run
    if unknown:
        raise ValueError(f"unknown {kind} spec key(s): {', '.join(sorted(unknown))}")
    if spec.get(BESIDE, NOTHING) not in CHOICES:
        raise ValueError(f"{BESIDE}={spec[BESIDE]!r} is not one of {', '.join(CHOICES)}")
    missing = set(defaults) - set(spec)
    if missing:
        raise ValueError(f"missing {kind} spec key(s): {', '.join(sorted(missing))}")
    for key, allowed in choices.items():
        if spec[key] not in allowed:
            raise ValueError(f"{key}={spec[key]!r} is not one of {', '.join(map(str, allowed))}")
    for key, low in least.items():
        if not isinstance(spec[key], int) or isinstance(spec[key], bool) or spec[key] < low:
            what = "a positive integer" if low == 1 else "an integer >= 0"
            raise ValueError(f"{key}={spec[key]!r} must be {what}")
    for key in numbers:
        value = spec[key]
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
            raise ValueError(f"{key}={value!r} must be a positive number")


def is_busy(spec: dict[str, Any]) -> bool:
    return spec.get(BESIDE, NOTHING) == BUSY_CORE


def busy_cores(spec: dict[str, Any], ranks: int, n_cores: int) -> int:
    """Burners beside the spec's run on a quiet CPU (0 for a plain run), for run/sweep/cost.py."""
    return burners_for(ranks, n_cores, 0) if is_busy(spec) else 0


def name_parts(spec: dict[str, Any]) -> list[str]:
    return [NAME_PART] if is_busy(spec) else []


def running_now() -> int:
    """Runnable processes besides this one: the median of /proc/stat's procs_running reads."""
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
    """Burners that bring `ranks` + `others` to OVER_CORES over `n_cores`, and at least one: with
    none a busy run matched the others and margins missed a quiet machine's gap (29bf50a)."""
    return max(1, n_cores + OVER_CORES - ranks - others)


def sized(
    spec: dict[str, Any], info: dict[str, Any], runs: bool = True
) -> tuple[int, dict[str, Any]]:
    """(burners to start beside the spec's run, its provenance record): BURNERS on a GPU node,
    else sized to the load found now; none where no command `runs` (an unsupported spec)."""
    if not is_busy(spec) or not runs:
        return 0, {"busy_cores": 0}
    if info.get("gpu_count"):
        return BURNERS, record()
    others, n_cores = running_now(), probe.max_ranks(info)
    n = burners_for(int(spec.get("gpus", 1)), n_cores, others)
    return n, record(n, (others, n_cores))


def record(n: int = BURNERS, found: tuple[int, int] | None = None) -> dict[str, Any]:
    """A busy run's provenance record; `found` is (other runnable processes, cores)."""
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
    """The second line a busy run's first log line gets ("" for a plain run)."""
    if not is_busy(spec):
        return ""
    return (f"\n# beside a busy core: {n} burner(s) ({shlex.join(burn_command())}, "
            "at the sweep's priority), stopped with the run")  # fmt: skip


def start(env: dict[str, str], n: int = BURNERS) -> list[subprocess.Popen]:
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
    for p in procs:
        if p.poll() is None:
            p.kill()
    for p in procs:
        p.wait()


@contextlib.contextmanager
def beside(n: int, env: dict[str, str]) -> Iterator[list[subprocess.Popen]]:
    """`n` burners spinning while the block runs, stopped and reaped however it ends."""
    procs = start(env, n) if n else []
    try:
        yield procs
    finally:
        with lifeline.shielded():
            stop(procs)
