"""The nsys SQLite export's tables as every nsys reader sees them (the metrics, the capture
settings, the time breakdown). nsys creates tables lazily, so any may be missing (`schema`).

Tables read (nsys 2021-2025): StringIds(id, value); CUPTI_ACTIVITY_KIND_RUNTIME(start, end,
nameId, eventClass, globalTid, correlationId): runtime and driver calls; ENUM_NSYS_EVENT_CLASS
(2023+); CUPTI_ACTIVITY_KIND_KERNEL(start, end, shortName / demangledName); MEMCPY(start, end,
bytes, copyKind, copyCount from 2025); ENUM_CUDA_MEMCPY_OPER(id, name, label: "HtoD" or
"Host-to-Device" by version); ANALYSIS_DETAILS(duration, startTime, stopTime): the session.
"""

from __future__ import annotations

import sqlite3

RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET = "CUPTI_ACTIVITY_KIND_MEMSET"
MEMCPY_ENUM = "ENUM_CUDA_MEMCPY_OPER"
EVENT_CLASS_ENUM = "ENUM_NSYS_EVENT_CLASS"
BACKTRACE_CLASS = "TRACE_PROCESS_EVENT_CUDABACKTRACE"
STRINGS = "StringIds"
DETAILS = "ANALYSIS_DETAILS"
CAPTURE_TABLE = "META_DATA_CAPTURE"
EXPORT_TABLE = "META_DATA_EXPORT"
OLD_EXPORT = "EXPORT_META_DATA"  # its name up to nsys 2023.2
CUDA_TABLES = (RUNTIME, KERNEL, MEMCPY)
# Every table of CUDA records: the activity span runs over all of them (memsets carry no metric
# but are GPU work inside the capture).
SPAN_TABLES = (RUNTIME, KERNEL, MEMCPY, MEMSET)
REQUIRED = {
    RUNTIME: ("start", "end", "nameId"),
    KERNEL: ("start", "end"),
    MEMCPY: ("start", "end", "bytes", "copyKind"),
    STRINGS: ("id", "value"),
}
# Kernel name columns in order of preference: shortName is the bare function name.
KERNEL_NAME_COLUMNS = ("shortName", "demangledName", "mangledName")


def schema(con: sqlite3.Connection) -> dict[str, set[str]]:
    """Table (and view) name -> its column names."""
    names = [
        r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")
    ]
    return {n: {r[1] for r in con.execute(f'PRAGMA table_info("{n}")')} for n in names}


def temp_views(con: sqlite3.Connection) -> list[str]:
    """A connection's TEMP views (steps.py's window) as statements for another connection."""
    rows = con.execute("SELECT sql FROM sqlite_temp_master WHERE type = 'view'").fetchall()
    return [sql.replace("CREATE VIEW", "CREATE TEMP VIEW", 1) for (sql,) in rows]


def connect(uri: str, views: list[str] = ()) -> sqlite3.Connection:
    """A connection to a `file:...?mode=ro` URI, with `views` (temp_views) made on it."""
    con = sqlite3.connect(uri, uri=True)
    for sql in views:
        con.execute(sql)
    return con


def strings(con: sqlite3.Connection, ids: list[int]) -> dict[int, str]:
    """StringIds id -> text for the given ids present."""
    out: dict[int, str] = {}
    for i in range(0, len(ids), 500):  # stay below SQLite's bound-variable limit
        chunk = ids[i : i + 500]
        marks = ",".join("?" * len(chunk))
        out.update(con.execute(f"SELECT id, value FROM {STRINGS} WHERE id IN ({marks})", chunk))
    return out


def kernel_name_column(columns: dict[str, set[str]]) -> str | None:
    cols = columns.get(KERNEL, set())
    return next((c for c in KERNEL_NAME_COLUMNS if c in cols), None)


def name_values(con: sqlite3.Connection, columns: dict[str, set[str]], table: str) -> list:
    """(name, value) rows of a META_DATA_* table, as text columns or keyId/valueId into
    StringIds; [] where absent."""
    cols = columns.get(table, set())
    if {"name", "value"} <= cols:
        return con.execute(f"SELECT name, value FROM {table}").fetchall()
    if {"keyId", "valueId"} <= cols:
        return con.execute(
            f"SELECT k.value, v.value FROM {table} t JOIN {STRINGS} k ON t.keyId = k.id "
            f"JOIN {STRINGS} v ON t.valueId = v.id"
        ).fetchall()
    return []


def runtime_calls(con: sqlite3.Connection, columns: dict[str, set[str]]) -> str:
    """SQL row source of CUPTI_ACTIVITY_KIND_RUNTIME with one row per call (backtraces out).

    `nsys profile --cudabacktrace` writes beside each call a row of event class
    TRACE_PROCESS_EVENT_CUDABACKTRACE, same globalTid and correlationId, filtered out by its id
    in ENUM_NSYS_EVENT_CLASS; without that table (nsys 2022) one row per (globalTid,
    correlationId) is kept, of the lowest event class (calls 0 and 1, backtraces 67), else the
    first written."""
    cols = columns[RUNTIME]
    calls = call_rows(con, columns)
    if calls is not None:
        return f"(SELECT * FROM {RUNTIME} WHERE {calls})"
    if not {"globalTid", "correlationId"} <= cols:
        return RUNTIME  # nothing to tell a call from its backtrace by
    # SQLite takes the bare columns from the row that holds the MIN(); a missing correlation id
    # (NULL or 0) never pairs.
    keep = "MIN(eventClass)" if "eventClass" in cols else "MIN(rowid)"
    corr = "CASE WHEN correlationId IS NULL OR correlationId = 0 THEN -rowid ELSE correlationId END"
    return f'(SELECT nameId, start, "end", {keep} FROM {RUNTIME} GROUP BY globalTid, {corr})'


def call_rows(con: sqlite3.Connection, columns: dict[str, set[str]]) -> str | None:
    """The SQL condition keeping the call rows where backtraces have their own event class
    (ENUM_NSYS_EVENT_CLASS); None where they cannot be told apart row by row."""
    enum = columns.get(EVENT_CLASS_ENUM, set())
    if "eventClass" not in columns[RUNTIME] or not {"id", "name"} <= enum:
        return None
    sql = f"SELECT id FROM {EVENT_CLASS_ENUM} WHERE name = ?"
    ids = [int(i) for (i,) in con.execute(sql, (BACKTRACE_CLASS,))]
    # an enum without the backtrace class (renamed in a later nsys?): None, rows are paired
    return f"eventClass NOT IN ({','.join(map(str, ids))})" if ids else None
