"""The artifact's run folders, for the reader's features that read one: the names of their files
(run/node/profiling.py declares them: analysis/ imports them from there) and the nsys capture mode
a run's launch recorded.

The reader installed on its own (`pip install .`) holds no run/ and reads no run folder: there
`profiling()` is None and a run folder given to `diff` is refused in one line. run/ is imported
only when a run folder is read, never to read a profile file.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from .metrics import ProfileError

_UNKNOWN = object()
_loaded: list = [_UNKNOWN]


def profiling() -> ModuleType | None:
    """run/node/profiling.py, or None where the reader runs without the artifact's run/."""
    if _loaded[0] is _UNKNOWN:
        try:
            from run.node import profiling as module
        except ImportError:
            module = None
        _loaded[0] = module
    return _loaded[0]


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
