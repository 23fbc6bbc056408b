"""Read an `nsys export --type sqlite` file into aggregated metric rows.

Everything is aggregated inside SQLite (GROUP BY), so Python only ever holds one row per distinct
API name / kernel name / copy kind: memory stays bounded for multi-GB exports.

Schema used (nsys 2021-2025 exports; tables are created lazily, so any of them may be missing):
    StringIds(id, value)
    CUPTI_ACTIVITY_KIND_RUNTIME(start, end, nameId -> StringIds.id, globalTid, ...)
    CUPTI_ACTIVITY_KIND_KERNEL(start, end, shortName / demangledName -> StringIds.id, ...)
    CUPTI_ACTIVITY_KIND_MEMCPY(start, end, bytes, copyKind -> ENUM_CUDA_MEMCPY_OPER.id, ...)
    ENUM_CUDA_MEMCPY_OPER(id, name, label)     label "HtoD" or "Host-to-Device" by version
    ANALYSIS_DETAILS(duration, startTime, stopTime, ...)   capture window, when present
Times are integer nanoseconds. One file is taken as one rank: an export that covers several
processes (nsys run around torchrun) is summed over all of them.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from .metrics import (
    CUPTI_COPY_KIND,
    ProfileError,
    RankProfile,
    Row,
    memcpy_metric,
    nccl_metric,
    runtime_metric,
)

SQLITE_MAGIC = b"SQLite format 3\x00"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMCPY_ENUM = "ENUM_CUDA_MEMCPY_OPER"
STRINGS = "StringIds"
DETAILS = "ANALYSIS_DETAILS"
_REQUIRED = {
    RUNTIME: ("start", "end", "nameId"),
    KERNEL: ("start", "end"),
    MEMCPY: ("start", "end", "bytes", "copyKind"),
    STRINGS: ("id", "value"),
}
# Kernel name columns in order of preference: shortName is the bare function name.
_KERNEL_NAME_COLUMNS = ("shortName", "demangledName", "mangledName")
_NS_PER_S = 1e9


def read_nsys_sqlite(path: str | os.PathLike[str]) -> RankProfile:
    """Aggregate one nsys SQLite export; raises ProfileError naming the file on bad input."""
    path = Path(path)
    _check_magic(path)
    try:
        con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise ProfileError(path, f"cannot open SQLite file ({exc})") from exc
    try:
        return _read(con, path)
    except sqlite3.Error as exc:
        raise ProfileError(path, f"corrupt or truncated SQLite file ({exc})") from exc
    finally:
        con.close()


def _check_magic(path: Path) -> None:
    try:
        with open(path, "rb") as fh:
            head = fh.read(len(SQLITE_MAGIC))
    except FileNotFoundError as exc:
        raise ProfileError(path, "file not found") from exc
    except OSError as exc:
        raise ProfileError(path, f"cannot read file ({exc.strerror})") from exc
    if head != SQLITE_MAGIC:
        raise ProfileError(path, "not a SQLite file (expected an `nsys export --type sqlite` file)")


def _read(con: sqlite3.Connection, path: Path) -> RankProfile:
    columns = _schema(con)
    activity = [t for t in (RUNTIME, KERNEL, MEMCPY) if t in columns]
    if STRINGS not in columns:
        raise ProfileError(
            path, "SQLite file of another schema: no StringIds table, not an nsys export"
        )
    for table in [STRINGS, *activity]:
        missing = [c for c in _REQUIRED[table] if c not in columns[table]]
        if missing:
            raise ProfileError(path, f"SQLite file of another schema: {table} lacks {missing}")

    rows: list[Row] = []
    spans: list[tuple[int, int]] = []  # (min start, max end) per group, for the wall time
    if RUNTIME in columns:
        rows += _runtime_rows(con, spans)
    if KERNEL in columns:
        name_col = next((c for c in _KERNEL_NAME_COLUMNS if c in columns[KERNEL]), None)
        if name_col is None:
            raise ProfileError(path, f"SQLite file of another schema: {KERNEL} has no name column")
        rows += _kernel_rows(con, name_col, spans)
    if MEMCPY in columns:
        rows += _memcpy_rows(con, columns, spans)

    wall_s, wall_from = _details_wall(con, columns)
    if wall_s <= 0 and spans:
        wall_s = (max(e for _, e in spans) - min(s for s, _ in spans)) / _NS_PER_S
        wall_from = "activity span"
    return RankProfile(str(path), "nsys", wall_s, wall_from, rows)


def _schema(con: sqlite3.Connection) -> dict[str, set[str]]:
    names = [
        r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")
    ]
    return {n: {r[1] for r in con.execute(f'PRAGMA table_info("{n}")')} for n in names}


def _strings(con: sqlite3.Connection, ids: list[int]) -> dict[int, str]:
    out: dict[int, str] = {}
    for i in range(0, len(ids), 500):  # stay below SQLite's bound-variable limit
        chunk = ids[i : i + 500]
        marks = ",".join("?" * len(chunk))
        out.update(con.execute(f"SELECT id, value FROM {STRINGS} WHERE id IN ({marks})", chunk))
    return out


def _grouped(con: sqlite3.Connection, table: str, key: str, extra: str = "") -> list[tuple]:
    # One full scan per table; `end` is quoted because it is an SQL keyword.
    sql = (
        f'SELECT {key}, COUNT(*), SUM("end" - start), MIN(start), MAX("end"){extra} '
        f"FROM {table} GROUP BY {key}"
    )
    return con.execute(sql).fetchall()


def _runtime_rows(con: sqlite3.Connection, spans: list[tuple[int, int]]) -> list[Row]:
    groups = _grouped(con, RUNTIME, "nameId")
    names = _strings(con, [g[0] for g in groups])
    rows = []
    for name_id, calls, total, lo, hi in groups:
        spans.append((lo, hi))
        raw = names.get(name_id, f"<nameId {name_id}>")
        metric = runtime_metric(raw)
        if metric:
            rows.append(Row(metric, raw, calls, (total or 0) / _NS_PER_S))
    return rows


def _kernel_rows(con: sqlite3.Connection, name_col: str, spans: list[tuple[int, int]]) -> list[Row]:
    groups = _grouped(con, KERNEL, name_col)
    names = _strings(con, [g[0] for g in groups])
    rows = []
    for name_id, calls, total, lo, hi in groups:
        spans.append((lo, hi))
        raw = names.get(name_id, "")
        metric = nccl_metric(raw)
        if metric:
            rows.append(Row(metric, raw, calls, (total or 0) / _NS_PER_S))
    return rows


def _memcpy_rows(
    con: sqlite3.Connection, columns: dict[str, set[str]], spans: list[tuple[int, int]]
) -> list[Row]:
    groups = _grouped(con, MEMCPY, "copyKind", ', SUM("bytes")')
    labels = dict(CUPTI_COPY_KIND)
    if MEMCPY_ENUM in columns:
        label_col = "label" if "label" in columns[MEMCPY_ENUM] else "name"
        for kind_id, label in con.execute(f"SELECT id, {label_col} FROM {MEMCPY_ENUM}"):
            # Old exports without `label` spell it CUDA_MEMCPY_OPER_HTOD.
            labels[kind_id] = str(label).removeprefix("CUDA_MEMCPY_OPER_")
    rows = []
    for kind, calls, total, lo, hi, nbytes in groups:
        spans.append((lo, hi))
        label = labels.get(kind, f"kind {kind}")
        metric = memcpy_metric(label)
        if metric:
            rows.append(
                Row(metric, f"CUDA memcpy {label}", calls, (total or 0) / _NS_PER_S, nbytes or 0)
            )
    return rows


def _details_wall(con: sqlite3.Connection, columns: dict[str, set[str]]) -> tuple[float, str]:
    """Capture window from ANALYSIS_DETAILS; (0, "") when absent so the caller falls back."""
    cols = columns.get(DETAILS, set())
    if "startTime" in cols and "stopTime" in cols:
        lo, hi = con.execute(f"SELECT MIN(startTime), MAX(stopTime) FROM {DETAILS}").fetchone()
        if lo is not None and hi is not None and hi > lo:
            return (hi - lo) / _NS_PER_S, f"{DETAILS}.stopTime-startTime"
    if "duration" in cols:
        (dur,) = con.execute(f"SELECT MAX(duration) FROM {DETAILS}").fetchone()
        if dur:
            return dur / _NS_PER_S, f"{DETAILS}.duration"
    return 0.0, ""
