"""The one kind of error a user can cause before anything runs.

Every check that runs before a launch (the matrix, a profiler choice, a missing model folder or
data set, a spec that cannot run, a GPU the installed torch cannot use) raises a subclass of
UserError with a message of one line. Entry points catch UserError alone and print
`error: <message>` with exit status 2, so bad input never ends in a traceback while real bugs
still do.
"""

from __future__ import annotations

import os


class UserError(ValueError):
    """Bad input found before any run; the message is one line that says what to do."""


def whole_number_env(name: str, default: int, error: type[UserError] = UserError) -> int:
    """A setting read from the environment as a whole number >= 1: unset or empty (`make X=`)
    is the default; anything else is one line of `error`."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        n = int(raw)
    except ValueError:
        n = 0
    if n < 1:
        raise error(f"{name} must be a whole number >= 1, got {raw!r}")
    return n
