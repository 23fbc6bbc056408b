"""A run's processes live and die with the attempt that launched them.

torchrun starts each rank in a session of its own, so killing the sweep's process group never
reached the ranks: orphans went on writing into a staging folder the next attempt reused. Hence
a parent-death signal (prctl PR_SET_PDEATHSIG) on the launched command and every rank (DataLoader
workers watch their rank themselves), and ATTEMPT_ENV, a tag every process of an attempt
inherits, so the sweep finds them all in /proc (also those adopted by init) and stops them.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

# "<run folder>#<attempt id>": the run folder finds every attempt of a run, the id one attempt.
ATTEMPT_ENV = "ARTIFACT_ATTEMPT"
PR_SET_PDEATHSIG = 1
GRACE_S = 5.0
SHIELDED = (signal.SIGINT, signal.SIGTERM)


def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


# Loaded once here: tie_to_parent also runs between fork and exec, where it should do no more
# than one foreign call.
_LIBC = _libc()


def new_attempt(run: Path) -> str:
    return f"{run.resolve()}#{socket.gethostname()}-{os.getpid()}-{time.time_ns()}"


def attempt_id(tag: str) -> str:
    return tag.rsplit("#", 1)[-1]


def tie_to_parent(sig: int = signal.SIGTERM) -> None:
    """Ask the kernel for `sig` when this process's parent dies; exit now if it already has.
    A Popen preexec_fn (it survives exec) and first thing in every rank; a no-op without prctl."""
    if _LIBC is None or not hasattr(_LIBC, "prctl"):
        return
    parent = os.getppid()
    _LIBC.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    # The parent died before the prctl took effect: this process was adopted. (Not "is the parent
    # pid 1": in a container the launcher itself may be pid 1.)
    if os.getppid() != parent:
        os._exit(128 + int(sig))


def members(prefix: str) -> list[int]:
    """Live processes (not this one) whose ATTEMPT_ENV starts with `prefix`."""
    needle = f"{ATTEMPT_ENV}={prefix}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            env = (entry / "environ").read_bytes()
        except OSError:  # gone meanwhile, or another user's
            continue
        if any(var.startswith(needle) for var in env.split(b"\0")):
            found.append(int(entry.name))
    return sorted(found)


def _signal(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def stop(prefix: str, grace_s: float = GRACE_S) -> list[int]:
    """SIGTERM every process of `prefix`, SIGKILL what is left after `grace_s`; the pids found.
    Zombies hold no environment, so a dead process is never counted."""
    pids = left = members(prefix)
    for sig, gap in ((signal.SIGTERM, 0.1), (signal.SIGKILL, 0.05)):
        _signal(left, sig)
        deadline = time.monotonic() + grace_s
        while (left := members(prefix)) and time.monotonic() < deadline:
            time.sleep(gap)
    return pids


def stop_earlier(run: Path, out=sys.stdout) -> list[int]:
    """Stop what earlier attempts of `run` left running here, and say so in one line."""
    pids = stop(f"{run.resolve()}#")
    if pids:
        print(
            f"[sweep] {run.name}: stopped {len(pids)} process(es) left by an earlier attempt "
            f"(pids {' '.join(map(str, pids))})",
            file=out,
            flush=True,
        )
    return pids


@contextlib.contextmanager
def shielded() -> Iterator[None]:
    """Clean-up that a second Ctrl-C or SIGTERM must not cut short; the signal acts after it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []
    saved = {s: signal.signal(s, lambda n, _f: pending.append(n)) for s in SHIELDED}
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
        if pending:
            signal.raise_signal(pending[0])
