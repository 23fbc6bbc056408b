"""The one kind of error a user can cause before anything runs, and the faults programs end on.

Every check before a launch (the matrix, a profiler, a missing model folder or data set, a spec
that cannot run, a GPU torch cannot use) raises a UserError of one line, which every program
(run/program.py) prints as `error: <message>` with its exit status: bad input never ends in a
traceback, while real bugs still do.
"""

from __future__ import annotations

import errno
import signal
import sys


class UserError(ValueError):
    """Bad input found before any run; the message is one line that says what to do."""

    status = 2  # the exit status of a program that ends on it


class Stopped(BaseException):
    """SIGTERM (a killed make, SLURM's scancel or requeue): unwinds like Ctrl-C, so every
    `finally` stops its processes and removes its half-written files."""


def unwind_on_signals() -> None:
    """SIGTERM raises Stopped, and Ctrl-C raises KeyboardInterrupt even where SIGINT came in
    ignored (a background job of a script, some CI runners): Python then leaves it ignored, and a
    Ctrl-C reaching the process group killed torchrun (which installs its own handler) while the
    sweep went on and recorded the stopped run as failed, exiting 0."""

    def _raise(*_: object) -> None:
        raise Stopped

    signal.signal(signal.SIGTERM, _raise)
    signal.signal(signal.SIGINT, signal.default_int_handler)


# Results that cannot be written because of where they are, not because of the run: bad input.
NOT_WRITABLE = (errno.EROFS, errno.EACCES, errno.EPERM)


def fault(exc: BaseException, resume: str = "") -> tuple[str, int] | None:
    """The one line and exit status of a fault, or None for a real bug (which keeps its
    traceback). `resume` says what picks up the work again."""
    tail = f"; {resume}" if resume else ""
    if isinstance(exc, KeyboardInterrupt):
        return f"interrupted (Ctrl-C){tail}", 130
    if isinstance(exc, Stopped):
        return f"stopped by SIGTERM{tail}", 143
    if isinstance(exc, UserError):
        return str(exc), exc.status
    if isinstance(exc, OSError):
        where = exc.filename or ""
        why = exc.strerror or str(exc)
        line = f"{where}: {why}" if where else why
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return f"{line} (free some space){tail}", 1
        if exc.errno in NOT_WRITABLE:
            return f"{line} (the results folder must be writable: RESULTS_DIR){tail}", 2
        if isinstance(exc, FileNotFoundError):
            return line, 2
        return f"{line}{tail}", 1
    return None


def exit_status(exc: BaseException, resume: str = "", quiet: bool = False) -> int:
    """Print a fault's one line (not when `quiet`: a torchrun rank but the first) and return its
    exit status; anything else (a real bug, SystemExit) is raised again."""
    got = fault(exc, resume)
    if got is None:
        raise exc
    if not quiet:
        print(f"error: {got[0]}", file=sys.stderr, flush=True)
    return got[1]
