"""Read an `nsys export --type sqlite` file into aggregated metric rows.

Everything is aggregated inside SQLite (GROUP BY), so Python only ever holds one row per distinct
API name / kernel name / copy kind: memory stays bounded for multi-GB exports.

Schema used (nsys 2021-2025 exports; tables are created lazily, so any of them may be missing):
    StringIds(id, value)
    CUPTI_ACTIVITY_KIND_RUNTIME(start, end, nameId -> StringIds.id, eventClass, globalTid,
        correlationId, ...)           runtime and driver calls in one table
    ENUM_NSYS_EVENT_CLASS(id, name)   2023+; eventClass ids, TRACE_PROCESS_EVENT_CUDABACKTRACE
    CUPTI_ACTIVITY_KIND_KERNEL(start, end, shortName / demangledName -> StringIds.id, ...)
    CUPTI_ACTIVITY_KIND_MEMCPY(start, end, bytes, copyKind, copyCount (2025+), ...)
    ENUM_CUDA_MEMCPY_OPER(id, name, label)     label "HtoD" or "Host-to-Device" by version
    ANALYSIS_DETAILS(duration, startTime, stopTime, ...)   the whole nsys session
Times are integer nanoseconds. One file is taken as one rank: an export that covers several
processes (nsys run around torchrun) is summed over all of them.

Counting (issue 19):
  * `nsys profile --cudabacktrace` writes, beside each call row, a second row of event class
    TRACE_PROCESS_EVENT_CUDABACKTRACE with the same globalTid and correlationId (named without the
    `_v7000` suffix). Only the call rows count: the backtrace class is filtered out by its id in
    ENUM_NSYS_EVENT_CLASS; a file without that table (nsys 2022) keeps one row per
    (globalTid, correlationId), the one of the lowest event class (calls are 0 and 1, backtraces
    67), or the first written where there is no eventClass column.
  * A batched copy (cudaMemcpyBatchAsync) is one row with copyCount copies: calls sum copyCount.
  * Unified-memory copy kinds (copyKind 11-13) are the metric memcpy_unified.

Wall time (the denominator of `share`): every file offers up to two spans, kept in
RankProfile.spans, and the capture mode picks one (`choose_wall`). The mode comes from, in order:
the run's profiling.json (run.node.profiling.NSYS_CAPTURE_KEY, our own runs), the export's own
META_DATA_CAPTURE table (name/value rows: START_TRIGGER, STOP_TRIGGER, START_DELAY_MS,
RUN_DURATION_MS, CAPTURE_RANGE; 2022 exports have none), else nsys's default, the whole session:
  * a capture range (cudaProfilerApi or NVTX): the CUDA activity span. nsys records CUDA only
    inside the range, and the loop synchronises the GPU at both ends, so the end is tight; the
    start is the first step's first CUDA call, so host time before it (a DataLoader wait of at
    most about one step) falls outside. ANALYSIS_DETAILS covers the whole session (start-up,
    every uncaptured step), far wider.
  * immediate or delayed start, with or without a duration, and the default: the session in
    ANALYSIS_DETAILS is what was recorded (the paper's LLM profiles are "the first 720 s"), else
    the CUDA activity span. A 2022 export has no capture table, so it takes the default and
    wall_from says so; a trigger this reader does not know is named in wall_from, never dropped.
The CUDA activity span (SPAN_ACTIVITY, from the first record's start to the last one's end over
SPAN_TABLES) is always kept beside the wall time, as RankProfile.activity_s.

Version: META_DATA_EXPORT (name/value rows) names the nsys release (EXPORT_PRODUCT_VERSION); one
newer than NSYS_COVERED is read as the newest covered layout, with one warning line.
"""

from __future__ import annotations

import dataclasses
import os
import sqlite3
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from pathlib import Path

from run.node.profiling import CAPTURE_API, CAPTURE_DURATION, CAPTURE_WHOLE

from .metrics import (
    CUPTI_COPY_KIND,
    ProfileError,
    RankProfile,
    Row,
    memcpy_metric,
    nccl_metric,
    newer_version_note,
    runtime_metric,
)

SQLITE_MAGIC = b"SQLite format 3\x00"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMCPY_ENUM = "ENUM_CUDA_MEMCPY_OPER"
EVENT_CLASS_ENUM = "ENUM_NSYS_EVENT_CLASS"
BACKTRACE_CLASS = "TRACE_PROCESS_EVENT_CUDABACKTRACE"
STRINGS = "StringIds"
MEMSET = "CUPTI_ACTIVITY_KIND_MEMSET"
DETAILS = "ANALYSIS_DETAILS"
CAPTURE_TABLE = "META_DATA_CAPTURE"
EXPORT_TABLE = "META_DATA_EXPORT"
# The nsys releases whose export layout the golden files follow (synth.NSYS_SCHEMAS, README).
NSYS_COVERED = ("2022.4", "2024.4", "2025.3")
# META_DATA_EXPORT rows naming the nsys release; EXPORT_SCHEMA_VERSION numbers the schema apart
# from releases, so it cannot be matched to NSYS_COVERED.
_RELEASE_KEYS = ("EXPORT_PRODUCT_VERSION", "NSIGHT_SYSTEMS_VERSION")
CUDA_TABLES = (RUNTIME, KERNEL, MEMCPY)
_REQUIRED = {
    RUNTIME: ("start", "end", "nameId"),
    KERNEL: ("start", "end"),
    MEMCPY: ("start", "end", "bytes", "copyKind"),
    STRINGS: ("id", "value"),
}
# Kernel name columns in order of preference: shortName is the bare function name.
_KERNEL_NAME_COLUMNS = ("shortName", "demangledName", "mangledName")
_NS_PER_S = 1e9
# RankProfile.spans keys. The activity span runs over every CUDA record the export holds: API
# calls, kernels, copies and memsets (memsets carry no metric but are GPU work inside the capture).
SPAN_ACTIVITY = "CUDA activity span"
SPAN_TABLES = (RUNTIME, KERNEL, MEMCPY, MEMSET)
SPAN_SESSION = "ANALYSIS_DETAILS session"
# A capture range opened by an NVTX range (--capture-range=nvtx); cudaProfilerApi is CAPTURE_API.
CAPTURE_NVTX = "NVTX"
NSYS_DEFAULT = "nsys default: whole session (the export records no capture settings)"
# Where a capture mode came from, as wall_from names it.
FROM_PLAN = "nsys capture"
FROM_FILE = CAPTURE_TABLE
_RANGE_CAPTURES = (CAPTURE_API, CAPTURE_NVTX)
_SESSION_CAPTURES = (CAPTURE_DURATION, CAPTURE_WHOLE)


def read_nsys_sqlite(path: str | os.PathLike[str], capture: str | None = None) -> RankProfile:
    """Aggregate one nsys SQLite export; raises ProfileError naming the file on bad input.

    capture: the run's nsys capture mode (CAPTURE_API, CAPTURE_DURATION, CAPTURE_WHOLE), or None
    when unknown; it picks the wall time (module docstring).
    """
    path = Path(path)
    _check_magic(path)
    try:
        con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise ProfileError(path, f"cannot open SQLite file ({exc})") from exc
    try:
        return with_capture(_read(con, path), capture)
    except sqlite3.Error as exc:
        raise ProfileError(path, f"corrupt or truncated SQLite file ({exc})") from exc
    finally:
        con.close()


def _on_own_connection(path: Path, rows_of: Callable[..., list[Row]], *args: object) -> list[Row]:
    with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as con:
        return rows_of(con, *args)


def choose_wall(
    spans: dict[str, float], capture: str | None, origin: str = FROM_PLAN
) -> tuple[float, str]:
    """(wall seconds, where it came from) for a file's spans under a capture mode; (0, "") if none.

    The rule is the module docstring's: the activity span for a capture range, the nsys session
    for delay, duration and whole-run captures and for None (nsys's default). `origin` names where
    `capture` came from; a mode this reader does not know falls back to the default, saying so.
    """
    if capture in _RANGE_CAPTURES:
        order, why = (SPAN_ACTIVITY,), f"{origin}: {capture} window"
    elif capture in _SESSION_CAPTURES:
        order, why = (SPAN_SESSION, SPAN_ACTIVITY), f"{origin}: {capture}"
    elif capture is None:
        order, why = (SPAN_SESSION, SPAN_ACTIVITY), NSYS_DEFAULT
    else:
        order = (SPAN_SESSION, SPAN_ACTIVITY)
        why = f"{origin}: trigger {capture!r} not understood, so nsys default: whole session"
    for name in order:
        if spans.get(name, 0) > 0:
            return spans[name], f"{name} ({why})"
    return 0.0, ""


def with_capture(profile: RankProfile, capture: str | None) -> RankProfile:
    """The same nsys profile with its wall time chosen for `capture` (other sources unchanged).

    capture: the run's mode from profiling.json; None leaves it to what the export records.
    """
    if profile.source != "nsys":
        return profile
    if capture is not None:
        wall_s, wall_from = choose_wall(profile.spans, capture, FROM_PLAN)
    else:
        wall_s, wall_from = choose_wall(profile.spans, profile.file_capture, FROM_FILE)
    return dataclasses.replace(profile, wall_s=wall_s, wall_from=wall_from)


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
    if STRINGS not in columns:
        raise ProfileError(
            path, "SQLite file of another schema: no StringIds table, not an nsys export"
        )
    activity = [t for t in CUDA_TABLES if t in columns]
    for table in [STRINGS, *activity]:
        missing = [c for c in _REQUIRED[table] if c not in columns[table]]
        if missing:
            raise ProfileError(path, f"SQLite file of another schema: {table} lacks {missing}")
    if not activity:
        # An nsys run needs CUDA (run.node.profiling); with no CUDA table at all the capture range
        # never opened or CUDA was not traced, and every metric would be a silent absence.
        raise ProfileError(
            path,
            f"nsys export without CUDA tables ({', '.join(CUDA_TABLES)}): nothing was traced "
            "(was --trace=cuda on, and did the capture range open?)",
        )

    spans: list[tuple[int, int]] = []  # (min start, max end) per group, for the activity span
    tables = [(_runtime_rows, columns)] if RUNTIME in columns else []
    if KERNEL in columns:
        name_col = next((c for c in _KERNEL_NAME_COLUMNS if c in columns[KERNEL]), None)
        if name_col is None:
            raise ProfileError(path, f"SQLite file of another schema: {KERNEL} has no name column")
        tables.append((_kernel_rows, name_col))
    if MEMCPY in columns:
        tables.append((_memcpy_rows, columns))
    # Each GROUP BY is a sort of its whole table, most of the read time; SQLite runs them side by
    # side on their own connections (it releases the GIL), so the cores share them.
    with ThreadPoolExecutor(len(tables)) as pool:
        jobs = [pool.submit(_on_own_connection, path, fn, arg, spans) for fn, arg in tables]
        rows = [row for job in jobs for row in job.result()]
    if {"start", "end"} <= columns.get(MEMSET, set()):
        lo, hi = con.execute(f'SELECT MIN(start), MAX("end") FROM {MEMSET}').fetchone()
        if lo is not None and hi is not None:
            spans.append((lo, hi))

    found: dict[str, float] = {}
    session = _session_s(con, columns)
    if session > 0:
        found[SPAN_SESSION] = session
    if spans:
        found[SPAN_ACTIVITY] = (max(e for _, e in spans) - min(s for s, _ in spans)) / _NS_PER_S
    return RankProfile(
        str(path),
        "nsys",
        0.0,
        "",
        rows,
        spans=found,
        activity_s=found.get(SPAN_ACTIVITY, float("nan")),
        file_capture=_file_capture(con, columns, path),
        version_note=_newer_release(con, columns),
    )


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


def _grouped(
    con: sqlite3.Connection, source: str, key: str, count: str = "COUNT(*)", extra: str = ""
) -> list[tuple]:
    # One full scan per table; `end` is quoted because it is an SQL keyword.
    sql = (
        f'SELECT {key}, {count}, SUM("end" - start), MIN(start), MAX("end"){extra} '
        f"FROM {source} GROUP BY {key}"
    )
    return con.execute(sql).fetchall()


def runtime_calls(con: sqlite3.Connection, columns: dict[str, set[str]]) -> str:
    """SQL row source of CUPTI_ACTIVITY_KIND_RUNTIME with one row per call (backtraces out)."""
    cols = columns[RUNTIME]
    enum = columns.get(EVENT_CLASS_ENUM, set())
    if "eventClass" in cols and {"id", "name"} <= enum:
        ids = [
            int(i)
            for (i,) in con.execute(
                f"SELECT id FROM {EVENT_CLASS_ENUM} WHERE name = ?", (BACKTRACE_CLASS,)
            )
        ]
        if ids:
            return f"(SELECT * FROM {RUNTIME} WHERE eventClass NOT IN ({','.join(map(str, ids))}))"
        # an enum without the backtrace class (renamed in a later nsys?): pair rows as below
    if not {"globalTid", "correlationId"} <= cols:
        return RUNTIME  # nothing to tell a call from its backtrace by
    # No enum (nsys 2022), or one without the class: one row per (thread, correlation id). SQLite takes the bare columns
    # from the row that holds the MIN(); a missing correlation id (NULL or 0) never pairs.
    keep = "MIN(eventClass)" if "eventClass" in cols else "MIN(rowid)"
    corr = "CASE WHEN correlationId IS NULL OR correlationId = 0 THEN -rowid ELSE correlationId END"
    return f'(SELECT nameId, start, "end", {keep} FROM {RUNTIME} GROUP BY globalTid, {corr})'


def _runtime_rows(
    con: sqlite3.Connection, columns: dict[str, set[str]], spans: list[tuple[int, int]]
) -> list[Row]:
    groups = _grouped(con, runtime_calls(con, columns), "nameId")
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
    # A batched record holds copyCount copies (at least 1: older rows may hold 0 or NULL); its
    # duration and bytes are the batch's, summed as recorded.
    count = "SUM(MAX(COALESCE(copyCount, 1), 1))" if "copyCount" in columns[MEMCPY] else "COUNT(*)"
    groups = _grouped(con, MEMCPY, "copyKind", count, ', SUM("bytes")')
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


def _session_s(con: sqlite3.Connection, columns: dict[str, set[str]]) -> float:
    """The nsys session from ANALYSIS_DETAILS in seconds; 0 when absent."""
    cols = columns.get(DETAILS, set())
    if "startTime" in cols and "stopTime" in cols:
        lo, hi = con.execute(f"SELECT MIN(startTime), MAX(stopTime) FROM {DETAILS}").fetchone()
        if lo is not None and hi is not None and hi > lo:
            return (hi - lo) / _NS_PER_S
    if "duration" in cols:
        (dur,) = con.execute(f"SELECT MAX(duration) FROM {DETAILS}").fetchone()
        if dur:
            return dur / _NS_PER_S
    return 0.0


def _name_values(con: sqlite3.Connection, columns: dict[str, set[str]], table: str) -> list:
    """(name, value) rows of a META_DATA_* table, in either layout seen in exports: text columns
    name/value, or keyId/valueId into StringIds. [] where the table or its columns are absent."""
    cols = columns.get(table, set())
    if {"name", "value"} <= cols:
        return con.execute(f"SELECT name, value FROM {table}").fetchall()
    if {"keyId", "valueId"} <= cols:
        return con.execute(
            f"SELECT k.value, v.value FROM {table} t JOIN {STRINGS} k ON t.keyId = k.id "
            f"JOIN {STRINGS} v ON t.valueId = v.id"
        ).fetchall()
    return []


def _file_capture(con: sqlite3.Connection, columns: dict[str, set[str]], path: Path) -> str | None:
    """The capture mode META_DATA_CAPTURE records, None where it records none.

    A trigger this reader does not know comes back as written, so that choose_wall names it; a
    setting given twice with two values is a ProfileError (no wall time could be trusted).
    """
    found: dict[str, str] = {}
    for n, v in _name_values(con, columns, CAPTURE_TABLE):
        if n is None:
            continue
        name, value = str(n).strip().upper(), "" if v is None else str(v).strip()
        if found.setdefault(name, value) != value:
            raise ProfileError(
                path, f"{CAPTURE_TABLE} contradicts itself: {name} is {found[name]!r} and {value!r}"
            )
    # A capture range, where the file marks one, is what opened the recording whatever the trigger.
    marked = found.get("CAPTURE_RANGE", "")
    trigger = marked if marked.lower() not in ("", "none") else found.get("START_TRIGGER", "")
    low = trigger.lower().replace(" ", "")
    if "cudaprofilerapi" in low:
        return CAPTURE_API
    if "nvtx" in low:
        return CAPTURE_NVTX
    duration = _int_or_zero(found.get("RUN_DURATION_MS", ""))
    if low in ("immediate", "delay", "delayed", "timer") or (not low and duration > 0):
        return CAPTURE_DURATION if duration > 0 else CAPTURE_WHOLE
    return trigger or None


def _newer_release(con: sqlite3.Connection, columns: dict[str, set[str]]) -> str:
    """RankProfile.version_note for the nsys release META_DATA_EXPORT names ("" if it names none)."""
    found = dict(_name_values(con, columns, EXPORT_TABLE))
    release = next((found[k] for k in _RELEASE_KEYS if found.get(k) is not None), None)
    return newer_version_note("nsys export of", release, NSYS_COVERED)


def _int_or_zero(text: str) -> int:
    try:
        return int(float(text))
    except (ValueError, OverflowError):  # "", "n/a", "inf": no duration to speak of
        return 0
