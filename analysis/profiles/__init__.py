"""Profile readers (nsys SQLite exports, torch.profiler Chrome traces) and the tidy metrics table.
Reading needs no pandas; the artifact's frames (artifact.py) do."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from . import steps
from .breakdown import Breakdown, for_wall, read_nsys, read_torch
from .metrics import SQLITE_MAGIC, ProfileError, RankProfile, reading
from .torch_trace import GZIP_MAGIC

_RANK = re.compile(r"(?<![a-z])rank[_-]?(\d+)", re.IGNORECASE)
_NSYS_REPORT_SUFFIXES = (".nsys-rep", ".qdrep")


def detect_source(path: str | os.PathLike[str]) -> str:
    """Return "nsys" or "torch" from the file's first bytes (names lie; contents do not)."""
    path = Path(path)
    if path.suffix in _NSYS_REPORT_SUFFIXES:
        raise ProfileError(
            path, "nsys report, not an export: run `nsys export --type sqlite` on it first"
        )
    with reading(path), open(path, "rb") as fh:
        head = fh.read(len(SQLITE_MAGIC))
    if head.startswith(SQLITE_MAGIC):
        return "nsys"
    if head.startswith(GZIP_MAGIC) or head.lstrip()[:1] in (b"{", b"["):
        return "torch"
    if not head:
        raise ProfileError(path, "empty file")
    raise ProfileError(path, "unknown format: neither an nsys SQLite export nor a JSON trace")


def read_profile_breakdown(
    path: str | os.PathLike[str], cpu_ops: bool = True
) -> tuple[RankProfile, Breakdown]:
    """One profile file of either kind, read once; ProfileError on bad input."""
    if detect_source(path) == "nsys":
        return read_nsys(path)
    return read_torch(path, cpu_ops=cpu_ops)


def rank_from_path(path: str | os.PathLike[str]) -> int | None:
    """Rank written in the file name or, failing that, in a parent folder (rank0/, rank_1/)."""
    path = Path(path)
    for part in [path.name, *(p.name for p in path.parents)]:
        found = _RANK.findall(part)
        if found:
            return int(found[-1])
    return None


def load(
    paths: Sequence[str | os.PathLike[str]],
    cpu_ops: bool = True,
    choice: steps.Choice | None = None,
    capture: str | None = None,
) -> list[tuple[int, RankProfile, Breakdown, list]]:
    """Read files, each once, and give each a rank: recorded in the trace, else in its path,
    else by order. Two files of one source claiming one rank raise ProfileError (it would double
    count); a format version newer than the tested ones gets one warning line on stderr.
    choice: over those steps (StepError for one a file lacks), each step's (Step, Breakdown)
    last; else capture, where known, is the run's nsys capture mode (nsys_sqlite.with_capture)."""

    def read(path: str | os.PathLike[str]) -> tuple[RankProfile, Breakdown, list]:
        if choice is not None:
            return steps.read_steps(path, detect_source(path), choice, cpu_ops)
        prof, bd = read_profile_breakdown(path, cpu_ops)
        if capture is not None:
            from .nsys_sqlite import with_capture

            prof = with_capture(prof, capture)
            bd = for_wall(bd, prof)
        return prof, bd, []

    read_all = [read(p) for p in paths]
    profiles = [prof for prof, *_ in read_all]
    claimed: list[int | None] = []
    for path, prof in zip(paths, profiles, strict=True):
        claimed.append(prof.rank_hint if prof.rank_hint is not None else rank_from_path(path))
    taken = {r for r in claimed if r is not None}
    spare = (r for r in range(len(paths) + len(taken)) if r not in taken)
    ranks = [r if r is not None else next(spare) for r in claimed]
    seen: dict[tuple[str, int], str | os.PathLike[str]] = {}
    for path, prof, rank in zip(paths, profiles, ranks, strict=True):
        if (prof.source, rank) in seen:
            other = seen[(prof.source, rank)]
            raise ProfileError(path, f"rank {rank} ({prof.source}) already given by {other}")
        seen[(prof.source, rank)] = path
    # Printed here, the one place every entry point (cli, diff, collect) reads through, and only
    # once every file was read, so that a failing run still says exactly one line.
    for prof in profiles:
        if prof.version_note:
            print(f"warning: {prof.path}: {prof.version_note}", file=sys.stderr)
    return [(r, *got) for r, got in zip(ranks, read_all, strict=True)]
