"""The one wrapper of every `python -m` program of run/, analysis/ and report/.

    @program("the same command resumes")
    def main(argv: list[str]) -> int:
        args = parser().parse_args(argv)
        ...

`main(argv=None)` checks every setting first (run/settings.py), before any argument is parsed, so
a bad value is refused on every call, `--help` included; then runs the body. A fault ends in its
one `error: ...` line and exit status (run.errors.fault: Ctrl-C 130, SIGTERM 143, a full disk 1),
printed by rank 0 only under torchrun. A real bug keeps its traceback; argparse's exit passes
through. The profile reader installed on its own (`profread`) holds no run/: its programs check
the settings where run/ is beside them (analysis/profiles/run_names.py).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Sequence
from typing import Any

from run import settings
from run.errors import exit_status


def program(resume: str = "") -> Callable[[Callable[..., int]], Callable[..., int]]:
    """Make `body(argv, **kw) -> int` a program's `main(argv=None, **kw) -> int`. `resume` ends the
    line of an interruption or a full disk: what picks the work up again."""

    def wrap(body: Callable[..., int]) -> Callable[..., int]:
        @functools.wraps(body)
        def main(argv: Sequence[str] | None = None, **kw: Any) -> int:
            try:
                settings.check_all()
                return body(list(sys.argv[1:] if argv is None else argv), **kw)
            except BaseException as exc:
                return exit_status(exc, resume, quiet=settings.rank() != 0)

        return main

    return wrap
