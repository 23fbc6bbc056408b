"""The artifact's run folders for the reader: run/node/profiling.py (their file names, a run's nsys
capture mode), imported only when a run folder is read. The reader installed on its own (`pip
install .`) has no run/: there `profiling()` is None and a run folder is refused in one line.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from types import ModuleType

from .metrics import ProfileError


@functools.cache
def profiling() -> ModuleType | None:
    """run/node/profiling.py, or None where the reader runs without the artifact's run/."""
    try:
        from run.node import profiling as module
    except ImportError:
        return None
    return module


def settings_refused() -> bool:
    """The artifact's settings checked as every program does (run/program.py): True after the
    first bad value's line; False without run/."""
    try:
        from run import settings
    except ImportError:
        return False
    try:
        settings.check_all()
    except settings.SettingError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return True
    return False


def needed(folder: Path) -> ModuleType:
    """run/node/profiling.py to read a run folder; ProfileError where the reader has no run/."""
    module = profiling()
    if module is None:
        raise ProfileError(
            folder,
            "a folder is read as the artifact's run folder, which this installed reader cannot"
            " read (no run/ beside it): name its profile files or its metrics CSV",
        )
    return module
