"""Profile readers (nsys SQLite exports, torch.profiler Chrome traces) and the tidy metrics table.

Typical use:

    from analysis.profiles import metrics_table, by_metric, METRICS
    df = metrics_table("llm-fsdp-2gpu", ["rank0.sqlite", "rank1.sqlite"])
    by_metric(df)  # one row per (run, rank, source, metric)
    add_launch_all(by_metric(df))  # + kernel_launch_all: every launch API in LAUNCH_APIS

The frames above need pandas; reading a profile does not (metrics.py: the same rows as plain
tuples, which the CLI uses, so that the reader installs and runs without pandas).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from . import steps
from .breakdown import Breakdown, read_nsys, read_torch
from .metrics import (
    COLUMNS,
    KERNEL_LAUNCH_ALL,
    LAUNCH_APIS,
    METRICS,
    SQLITE_MAGIC,
    ProfileError,
    RankProfile,
    add_launch_all,
    by_metric,
    concat_frames,
    profile_frame,
    read_metrics_csv,
    write_csv_atomic,
)
from .torch_trace import GZIP_MAGIC, read_torch_trace

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "COLUMNS",
    "KERNEL_LAUNCH_ALL",
    "LAUNCH_APIS",
    "METRICS",
    "Breakdown",
    "ProfileError",
    "RankProfile",
    "add_launch_all",
    "by_metric",
    "detect_source",
    "load_profiles",
    "load_steps",
    "load_with_breakdown",
    "metrics_table",
    "rank_from_path",
    "read_metrics_csv",
    "read_nsys_sqlite",
    "read_profile",
    "read_profile_breakdown",
    "read_torch_trace",
    "write_csv_atomic",
]

_RANK = re.compile(r"(?<![a-z])rank[_-]?(\d+)", re.IGNORECASE)
_NSYS_REPORT_SUFFIXES = (".nsys-rep", ".qdrep")


def __getattr__(name: str) -> object:
    """read_nsys_sqlite, imported when first asked for: the nsys reader (sqlite3, its pool of
    connections) is imported only where an nsys export is read, so a Kineto trace reads without."""
    if name == "read_nsys_sqlite":
        from .nsys_sqlite import read_nsys_sqlite

        return read_nsys_sqlite
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def detect_source(path: str | os.PathLike[str]) -> str:
    """Return "nsys" or "torch" from the file's first bytes (names lie; contents do not)."""
    path = Path(path)
    if path.suffix in _NSYS_REPORT_SUFFIXES:
        raise ProfileError(
            path, "nsys report, not an export: run `nsys export --type sqlite` on it first"
        )
    try:
        with open(path, "rb") as fh:
            head = fh.read(len(SQLITE_MAGIC))
    except FileNotFoundError as exc:
        raise ProfileError(path, "file not found") from exc
    except OSError as exc:
        raise ProfileError(path, f"cannot read file ({exc.strerror or exc})") from exc
    if head.startswith(SQLITE_MAGIC):
        return "nsys"
    if head.startswith(GZIP_MAGIC) or head.lstrip()[:1] in (b"{", b"["):
        return "torch"
    if not head:
        raise ProfileError(path, "empty file")
    raise ProfileError(path, "unknown format: neither an nsys SQLite export nor a JSON trace")


def read_profile(path: str | os.PathLike[str], cpu_ops: bool = True) -> RankProfile:
    """Read one profile file of either kind; raises ProfileError on bad input."""
    if detect_source(path) == "nsys":
        from .nsys_sqlite import read_nsys_sqlite

        return read_nsys_sqlite(path)
    return read_torch_trace(path, cpu_ops=cpu_ops)


def read_profile_breakdown(
    path: str | os.PathLike[str], cpu_ops: bool = True
) -> tuple[RankProfile, Breakdown]:
    """read_profile and the file's time breakdown (breakdown.py) from one reading of it."""
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


def load_profiles(
    paths: Sequence[str | os.PathLike[str]], cpu_ops: bool = True
) -> list[tuple[int, RankProfile]]:
    """Read files and give each a rank: recorded in the trace, else in its path, else by order.

    Two files of the same source claiming one rank raise ProfileError (it would double count).
    A file of a format version newer than the tested ones gets one warning line on stderr.
    """
    return [
        (rank, prof) for rank, prof, _ in _load(paths, lambda p: (read_profile(p, cpu_ops), None))
    ]


def load_with_breakdown(
    paths: Sequence[str | os.PathLike[str]], cpu_ops: bool = True
) -> list[tuple[int, RankProfile, Breakdown]]:
    """load_profiles, each file's time breakdown beside its profile, every file read once."""
    return _load(paths, lambda p: read_profile_breakdown(p, cpu_ops))


def load_steps(
    paths: Sequence[str | os.PathLike[str]], choice: steps.Choice, cpu_ops: bool = True
) -> list[tuple[int, RankProfile, steps.StepRead]]:
    """load_with_breakdown over the chosen training steps of each file (steps.py): each file's
    profile, and its steps' breakdowns (a StepRead). StepError for a step a file lacks."""

    def read(path: str | os.PathLike[str]) -> tuple[RankProfile, steps.StepRead]:
        got = steps.read_steps(path, detect_source(path), choice, cpu_ops)
        return got.profile, got

    return _load(paths, read)


def _load(paths: Sequence[str | os.PathLike[str]], read: Callable) -> list[tuple]:
    read_both = [read(p) for p in paths]
    profiles = [prof for prof, _ in read_both]
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
    return [(r, p, b) for r, (p, b) in zip(ranks, read_both, strict=True)]


def metrics_table(
    run: str, paths: Sequence[str | os.PathLike[str]], cpu_ops: bool = True
) -> pd.DataFrame:
    """The tidy metrics table (COLUMNS) for one run, one profile file per rank."""
    return concat_frames(profile_frame(run, r, p) for r, p in load_profiles(paths, cpu_ops))
