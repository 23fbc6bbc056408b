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
  * `nsys profile --cudabacktrace` writes a second row beside each call (named without the
    `_v7000` suffix); only the call rows count (nsys_schema.runtime_calls tells them apart).
  * A batched copy (cudaMemcpyBatchAsync) is one row with copyCount copies: calls sum copyCount.
  * Unified-memory copy kinds (copyKind 11-13) are the metric memcpy_unified.

Wall time (the denominator of `share`): every file offers up to two spans, kept in
RankProfile.spans, and the capture mode picks one (`choose_wall`). The mode comes from, in order:
the run's profiling.json (run.node.profiling.NSYS_CAPTURE_KEY, our own runs), the export's own
META_DATA_CAPTURE table (START_TRIGGER with STOP_TRIGGER, START_DELAY_MS, RUN_DURATION_MS,
CAPTURE_RANGE, read by capture_nsys.file_capture; 2022 exports have none), else nsys's default,
the whole session:
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

Version: META_DATA_EXPORT (name/value rows; EXPORT_META_DATA up to nsys 2023.2) names the nsys
release (EXPORT_PRODUCT_VERSION); one newer than NSYS_COVERED is read as the newest covered layout,
with one warning line. Exports before 2021.5 record none.
"""

from __future__ import annotations

import dataclasses
import os
import sqlite3
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from pathlib import Path

from .capture_nsys import (
    CAPTURE_API,
    CAPTURE_DURATION,
    CAPTURE_NVTX,
    CAPTURE_WHOLE,
    file_capture,
    place_wall,
    records_outside,
    session_span,
)
from .metrics import (
    CUPTI_COPY_KIND,
    SPAN_ACTIVITY,
    SPAN_SESSION,
    SPAN_WALL,
    SQLITE_MAGIC,
    ProfileError,
    RankProfile,
    Row,
    memcpy_metric,
    nccl_metric,
    newer_version_note,
    reading,
    runtime_metric,
)
from .nsys_schema import (
    CAPTURE_TABLE,
    CUDA_TABLES,
    EXPORT_TABLE,
    KERNEL,
    MEMCPY,
    MEMCPY_ENUM,
    MEMSET,
    OLD_EXPORT,
    REQUIRED,
    RUNTIME,
    STRINGS,
    call_rows,
    connect,
    kernel_name_column,
    name_values,
    runtime_calls,
    schema,
    strings,
    temp_views,
)

# The nsys releases a golden test reads (README's version table): the synthetic exports built in
# three releases' layouts (synth.NSYS_SCHEMAS: 2022.4, 2024.4, 2025.3) and the real exports of
# the corpus (tests/profiles/test_corpus.py, SOURCES.md). A newer release gets one warning line.
NSYS_COVERED = ("2021.5", "2022.1", "2022.3", "2022.4", "2023.1", "2023.2", "2023.3", "2024.1",
                "2024.4", "2024.5", "2024.6", "2025.1", "2025.3", "2025.5", "2026.1",
                "2026.2")  # fmt: skip
# META_DATA_EXPORT rows naming the nsys release; EXPORT_SCHEMA_VERSION numbers the schema apart
# from releases, so it cannot be matched to NSYS_COVERED.
_RELEASE_KEYS = ("EXPORT_PRODUCT_VERSION", "NSIGHT_SYSTEMS_VERSION")
_NS_PER_S = 1e9
NSYS_DEFAULT = "nsys default: whole session (the export records no capture settings)"
# Where a capture mode came from, as wall_from names it.
FROM_PLAN = "nsys capture"
FROM_FILE = CAPTURE_TABLE
_RANGE_CAPTURES = (CAPTURE_API, CAPTURE_NVTX)
_SESSION_CAPTURES = (CAPTURE_DURATION, CAPTURE_WHOLE)
# A job run beside the aggregations on its own read-only connection: (connection, schema) -> any.
Job = Callable[[sqlite3.Connection, dict[str, set[str]]], object]


def read_nsys_sqlite(path: str | os.PathLike[str], capture: str | None = None) -> RankProfile:
    """Aggregate one nsys SQLite export; raises ProfileError naming the file on bad input.

    capture: the run's nsys capture mode (CAPTURE_API, CAPTURE_DURATION, CAPTURE_WHOLE), or None
    when unknown; it picks the wall time (module docstring).
    """
    return read_nsys_with(path, (), capture)[0]


def read_nsys_with(
    path: str | os.PathLike[str],
    jobs: Sequence[Job],
    capture: str | None = None,
    counted: Callable[[str], dict[int, list] | None] | None = None,
    setup: Callable[[sqlite3.Connection], None] | None = None,
) -> tuple[RankProfile, list[object]]:
    """read_nsys_sqlite, plus what each job returns, run in the same pass over the file: every
    job gets its own read-only connection beside the aggregations (the time breakdown's unions).

    counted: where jobs read every call, kernel and copy row anyway, the GROUP BY they counted
    for a table (RUNTIME where call_rows tells the calls apart, KERNEL, MEMCPY), asked once the
    jobs are done: key -> the GROUP BY row after the key (breakdown_nsys); None where they could
    not, and the GROUP BY runs then. Each of those tables is read once so. setup: run on the
    first connection (steps.py's TEMP views), whose views every other connection gets too."""
    path = Path(path)
    _check_magic(path)
    try:
        con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise ProfileError(path, f"cannot open SQLite file ({exc})") from exc
    try:
        if setup is not None:
            setup(con)
        profile, results = _read(con, path, jobs, counted)
        return with_capture(profile, capture), results
    except sqlite3.Error as exc:
        raise ProfileError(path, f"corrupt or truncated SQLite file ({exc})") from exc
    finally:
        con.close()


def _on_own_connection(
    where: tuple[Path, list[str]], job: Callable[..., object], *args: object
) -> object:
    path, views = where
    with closing(connect(f"{path.resolve().as_uri()}?mode=ro", views)) as con:
        return job(con, *args)


def choose_wall(
    spans: dict[str, float], capture: str | None, origin: str = FROM_PLAN
) -> tuple[float, str]:
    """(wall seconds, where it came from) for a file's spans under a capture mode; (0, "") if none.

    The rule is the module docstring's: the activity span for a capture range, the nsys session
    for delay, duration and whole-run captures and for None (nsys's default). `origin` names where
    `capture` came from; a mode this reader does not know falls back to the default, saying so.
    """
    name, why = _chosen(spans, capture, origin)
    return (spans[name], f"{name} ({why})") if name else (0.0, "")


def _chosen(spans: dict[str, float], capture: str | None, origin: str) -> tuple[str, str]:
    """(the span choose_wall takes, why); ("", "") where the file offers none of its order."""
    if capture in _RANGE_CAPTURES:
        order, why = (SPAN_ACTIVITY,), f"{origin}: {capture} window"
    elif capture in _SESSION_CAPTURES:
        order, why = (SPAN_SESSION, SPAN_ACTIVITY), f"{origin}: {capture}"
    elif capture is None:
        order, why = (SPAN_SESSION, SPAN_ACTIVITY), NSYS_DEFAULT
    else:
        order = (SPAN_SESSION, SPAN_ACTIVITY)
        why = f"{origin}: trigger {capture!r} not understood, so nsys default: whole session"
    name = next((n for n in order if spans.get(n, 0) > 0), "")
    return name, why if name else ""


def with_capture(profile: RankProfile, capture: str | None) -> RankProfile:
    """The same nsys profile with its wall time chosen for `capture` (other sources unchanged).

    capture: the run's mode from profiling.json; None leaves it to what the export records. The
    chosen span is placed on the clock (span_ns[SPAN_WALL], the time breakdown's window) and
    widened to hold every CUDA record (place_wall), so that wall_s is that window's length.
    """
    if profile.source != "nsys":
        return profile
    if capture is not None:
        name, why = _chosen(profile.spans, capture, FROM_PLAN)
    else:
        name, why = _chosen(profile.spans, profile.file_capture, FROM_FILE)
    places = {k: v for k, v in profile.span_ns.items() if k != SPAN_WALL}
    if not name:
        return dataclasses.replace(profile, wall_s=0.0, wall_from="", span_ns=places)
    (lo, hi), note = place_wall(name, places, profile.outside)
    places[SPAN_WALL] = (lo, hi)
    return dataclasses.replace(
        profile, wall_s=(hi - lo) / _NS_PER_S, wall_from=f"{name} ({why}){note}", span_ns=places
    )


def _check_magic(path: Path) -> None:
    with reading(path), open(path, "rb") as fh:
        head = fh.read(len(SQLITE_MAGIC))
    if head != SQLITE_MAGIC:
        raise ProfileError(path, "not a SQLite file (expected an `nsys export --type sqlite` file)")


def _read(
    con: sqlite3.Connection, path: Path, jobs: Sequence[Job], counted: Callable | None = None
) -> tuple[RankProfile, list]:
    columns = schema(con)
    if STRINGS not in columns:
        raise ProfileError(
            path, "SQLite file of another schema: no StringIds table, not an nsys export"
        )
    activity = [t for t in CUDA_TABLES if t in columns]
    for table in [STRINGS, *activity]:
        missing = [c for c in REQUIRED[table] if c not in columns[table]]
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
    session = session_span(con, columns)
    session_ns = session[1] - session[0] if session else 0
    # Read before the long work: a capture table that contradicts itself ends the read at once.
    capture = file_capture(con, columns, path, session_ns)

    spans: list[tuple[int, int]] = []  # (min start, max end) per group, for the activity span
    tables = [(_runtime_rows, columns, RUNTIME)] if RUNTIME in columns else []
    if KERNEL in columns:
        name_col = kernel_name_column(columns)
        if name_col is None:
            raise ProfileError(path, f"SQLite file of another schema: {KERNEL} has no name column")
        tables.append((_kernel_rows, name_col, KERNEL))
    if MEMCPY in columns:
        tables.append((_memcpy_rows, columns, MEMCPY))
    # Each GROUP BY is a sort of its whole table, most of the read time; SQLite runs them side by
    # side on their own connections (it releases the GIL), so the cores share them, and the jobs
    # (the breakdown's scans) with them. The jobs may count the GROUP BYs (`counted`): the calls'
    # where they are told apart by their class (the rows are read in stored order then).
    by_job = {KERNEL, MEMCPY} | ({RUNTIME} if call_rows(con, columns) is not None else set())
    where = (path, temp_views(con))
    with ThreadPoolExecutor(len(tables) + len(jobs)) as pool:
        extra = [pool.submit(_on_own_connection, where, job, columns) for job in jobs]
        groups = [
            None if counted and table in by_job else
            pool.submit(_on_own_connection, where, fn, arg, spans) for fn, arg, table in tables
        ]  # fmt: skip
        results = [job.result() for job in extra]
        rows = [
            row for (fn, arg, table), job in zip(tables, groups, strict=True)
            for row in (job.result() if job else fn(con, arg, spans, counted(table)))
        ]  # fmt: skip
    if {"start", "end"} <= columns.get(MEMSET, set()):
        lo, hi = con.execute(f'SELECT MIN(start), MAX("end") FROM {MEMSET}').fetchone()
        if lo is not None and hi is not None:
            spans.append((lo, hi))

    found: dict[str, float] = {}
    places: dict[str, tuple[int, int]] = {}
    if session_ns > 0:
        found[SPAN_SESSION], places[SPAN_SESSION] = session_ns / _NS_PER_S, session
    if spans:
        places[SPAN_ACTIVITY] = (min(s for s, _ in spans), max(e for _, e in spans))
        found[SPAN_ACTIVITY] = (places[SPAN_ACTIVITY][1] - places[SPAN_ACTIVITY][0]) / _NS_PER_S
    profile = RankProfile(
        str(path),
        "nsys",
        0.0,
        "",
        rows,
        spans=found,
        activity_s=found.get(SPAN_ACTIVITY, float("nan")),
        file_capture=capture,
        version_note=_newer_release(con, columns),
        span_ns=places,
        outside=records_outside(con, columns, places),
        device_kind="CUDA",
    )
    return profile, results


def _grouped(
    con: sqlite3.Connection, source: str, key: str, count: str = "COUNT(*)", extra: str = ""
) -> list[tuple]:
    # One full scan per table; `end` is quoted because it is an SQL keyword.
    sql = (
        f'SELECT {key}, {count}, SUM("end" - start), MIN(start), MAX("end"){extra} '
        f"FROM {source} GROUP BY {key}"
    )
    return con.execute(sql).fetchall()


def _runtime_rows(
    con: sqlite3.Connection,
    columns: dict[str, set[str]],
    spans: list[tuple[int, int]],
    counted: dict[int, list] | None = None,
) -> list[Row]:
    groups = _grouped(con, runtime_calls(con, columns), "nameId") if counted is None else counted
    return _named_rows(con, groups, spans, runtime_metric, "<nameId {}>")


def _kernel_rows(
    con: sqlite3.Connection,
    name_col: str,
    spans: list[tuple[int, int]],
    counted: dict[int, list[int]] | None = None,
) -> list[Row]:
    groups = _grouped(con, KERNEL, name_col) if counted is None else counted
    return _named_rows(con, groups, spans, nccl_metric, "")


def _named_rows(con: sqlite3.Connection, groups: list[tuple] | dict[int, list],
                spans: list[tuple[int, int]], metric_of: Callable[[str], str | None],
                unnamed: str) -> list[Row]:  # fmt: skip
    """Metric rows of groups by StringIds id: a GROUP BY's, or read_nsys_with's `counted`."""
    groups = _as_grouped(groups) if isinstance(groups, dict) else groups
    names = strings(con, [g[0] for g in groups])
    rows = []
    for name_id, calls, total, lo, hi in groups:
        spans.append((lo, hi))
        raw = names.get(name_id, unnamed.format(name_id))
        metric = metric_of(raw)
        if metric:
            rows.append(Row(metric, raw, calls, (total or 0) / _NS_PER_S))
    return rows


def _as_grouped(counted: dict[int, list]) -> list[tuple]:
    return [(key, *values) for key, values in sorted(counted.items())]


def _memcpy_rows(
    con: sqlite3.Connection,
    columns: dict[str, set[str]],
    spans: list[tuple[int, int]],
    counted: dict[int, list] | None = None,
) -> list[Row]:
    # A batched record holds copyCount copies (at least 1: older rows may hold 0 or NULL); its
    # duration and bytes are the batch's, summed as recorded.
    count = "SUM(MAX(COALESCE(copyCount, 1), 1))" if "copyCount" in columns[MEMCPY] else "COUNT(*)"
    groups = (
        _grouped(con, MEMCPY, "copyKind", count, ', SUM("bytes")')
        if counted is None
        else _as_grouped(counted)
    )
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


def _newer_release(con: sqlite3.Connection, columns: dict[str, set[str]]) -> str:
    """RankProfile.version_note for the nsys release META_DATA_EXPORT names ("" if it names none)."""
    found = dict(name_values(con, columns, EXPORT_TABLE) or name_values(con, columns, OLD_EXPORT))
    release = next((found[k] for k in _RELEASE_KEYS if found.get(k) is not None), None)
    return newer_version_note("nsys export of", release, NSYS_COVERED)
