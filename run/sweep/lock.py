"""One lock per run on the shared results folder: several sweeps never run the same run twice.

A lock is `results/<scale>/runs/.locks/<run-name>.lock`, created with O_CREAT | O_EXCL (atomic on
local file systems and the shared ones clusters use: NFSv3+, Lustre, GPFS). It says who holds it
(host, pid, SLURM job, since when); its holder touches it every LOCK_STALE_S / 4 seconds.

A lock is stale when its holder is gone: the same host and a dead pid, or untouched for
LOCK_STALE_S seconds (a job killed on another node). A stale lock is taken over by first renaming
it to a name of the taker's own: of several sweeps that find it stale, only one rename succeeds.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any

from run import settings, store

LOCKS = ".locks"


def stale_s() -> float:
    return float(settings.value("LOCK_STALE_S"))


def lock_path(scale: str, name: str, root: Path | None = None) -> Path:
    return store.runs_dir(scale, root) / LOCKS / f"{name}.lock"


def holder(path: Path) -> dict[str, Any] | None:
    """Who holds a lock (None if there is none; {} if it is being written or unreadable)."""
    try:
        return json.loads(path.read_text() or "{}")
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        pass
    return True


def is_stale(path: Path, now: float | None = None) -> bool:
    try:
        age = (now or time.time()) - path.stat().st_mtime
    except FileNotFoundError:
        return False
    who = holder(path) or {}
    if who.get("host") == socket.gethostname() and isinstance(who.get("pid"), int):
        return not _alive(who["pid"])
    return age > stale_s()


def describe(path: Path) -> str:
    who = holder(path) or {}
    job = f" (SLURM job {who['job']})" if who.get("job") else ""
    return f"{who.get('host', '?')} pid {who.get('pid', '?')}{job}"


class Lock:
    """A held lock; `with` releases it. A daemon thread touches it while it is held."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._stop = threading.Event()
        self._every = stale_s() / 4
        self._beat = threading.Thread(target=self._heartbeat, daemon=True)
        self._beat.start()

    def _heartbeat(self) -> None:
        while not self._stop.wait(self._every):
            try:
                os.utime(self.path)
            except FileNotFoundError:  # taken over by another sweep: nothing left to touch
                return

    def release(self) -> None:
        self._stop.set()
        self.path.unlink(missing_ok=True)

    def __enter__(self) -> Lock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _create(path: Path) -> bool:
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)
    except FileExistsError:
        return False
    me = {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "job": settings.given_by_host("SLURM_JOB_ID"),
        "since": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(me, fh)
    except BaseException as exc:  # a full disk, Ctrl-C: no lock half-written, none left behind
        path.unlink(missing_ok=True)
        raise store.named(exc, path) from None
    return True


def acquire(scale: str, name: str, root: Path | None = None) -> Lock | None:
    """The run's lock, or None while another live sweep holds it. Recovers a stale lock."""
    path = lock_path(scale, name, root)
    if _create(path):
        return Lock(path)
    if not is_stale(path):
        return None
    # Rename first: of several sweeps that saw it stale, one rename wins and the others fail.
    grave = path.with_name(f"{path.name}.stale-{socket.gethostname()}-{os.getpid()}")
    try:
        os.rename(path, grave)
    except FileNotFoundError:
        return None
    if not is_stale(grave):
        # A sweep took it over between our look and our rename: that lock is live, put it back
        # (link fails only if yet another sweep made one meanwhile, a window of microseconds).
        try:
            os.link(grave, path)
        except FileExistsError:
            pass
        grave.unlink(missing_ok=True)
        return None
    grave.unlink(missing_ok=True)
    print(f"[lock] {name}: took over a stale lock", flush=True)
    return Lock(path) if _create(path) else None
