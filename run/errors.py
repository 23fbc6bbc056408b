"""The one kind of error a user can cause before anything runs.

Every check that runs before a launch (the matrix, a profiler choice, a missing model folder or
data set, a spec that cannot run, a GPU the installed torch cannot use) raises a subclass of
UserError with a message of one line. Entry points catch UserError alone and print
`error: <message>` with exit status 2, so bad input never ends in a traceback while real bugs
still do.
"""

from __future__ import annotations


class UserError(ValueError):
    """Bad input found before any run; the message is one line that says what to do."""
