"""Read an `nsys export --type sqlite` file into aggregated metric rows; how it counts and which
wall time divides the shares: README, "How the nsys reader counts".

Everything is aggregated inside SQLite (GROUP BY): Python holds one row per distinct name or copy
kind, so memory stays bounded for multi-GB exports. One file is one rank: an export covering
several processes (nsys around torchrun) is summed over them. Under a capture range the wall is
the CUDA activity span: nsys records CUDA only inside it and the loop synchronises the GPU at
both ends, so the end is tight; its start is the first step's first CUDA call (a DataLoader wait
before it, at most about one step, falls outside). Otherwise it is the session (the paper's LLM
profiles are "the first 720 s"). A release newer than NSYS_COVERED (META_DATA_EXPORT, or
EXPORT_META_DATA up to nsys 2023.2) is read as the newest covered layout, with one warning line.
"""

from __future__ import annotations

import dataclasses
import os
import sqlite3
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from pathlib import Path

from . import capture_nsys as cap
from . import nsys_schema as nsys
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

# The nsys releases a golden test reads (README's version table): synth.NSYS_SCHEMAS' layouts and
# the real exports of the corpus (tests/profiles/test_corpus.py, SOURCES.md).
NSYS_COVERED = ("2021.5", "2022.1", "2022.3", "2022.4", "2023.1", "2023.2", "2023.3", "2024.1",
                "2024.4", "2024.5", "2024.6", "2025.1", "2025.3", "2025.5", "2026.1",
                "2026.2")  # fmt: skip
# META_DATA_EXPORT rows naming the release (EXPORT_SCHEMA_VERSION numbers schemas, not releases).
_RELEASE_KEYS = ("EXPORT_PRODUCT_VERSION", "NSIGHT_SYSTEMS_VERSION")
_NS_PER_S = 1e9
NSYS_DEFAULT = "nsys default: whole session (the export records no capture settings)"
# A job run beside the aggregations on its own read-only connection: (connection, schema) -> any.
Job = Callable[[sqlite3.Connection, dict[str, set[str]]], object]


def read_nsys_sqlite(path: str | os.PathLike[str], capture: str | None = None) -> RankProfile:
    """Aggregate one nsys SQLite export; ProfileError naming the file on bad input. capture: the
    run's nsys capture mode, None when unknown (with_capture)."""
    return read_nsys_with(path, (), capture)[0]


def read_nsys_with(
    path: str | os.PathLike[str],
    jobs: Sequence[Job],
    capture: str | None = None,
    counted: Callable[[str], dict[int, list] | None] | None = None,
    setup: Callable[[sqlite3.Connection], None] | None = None,
) -> tuple[RankProfile, list[object]]:
    """read_nsys_sqlite, plus what each job returns, each on its own read-only connection beside
    the aggregations (the time breakdown's unions).

    counted(table), asked once the jobs are done: the GROUP BY the jobs counted for RUNTIME
    (where call_rows tells the calls apart), KERNEL or MEMCPY as key -> the row after the key, or
    None (the GROUP BY runs then), so each table is read once. setup: run on the first
    connection (steps.py's TEMP views); every other connection gets its views too."""
    path = Path(path)
    with reading(path), open(path, "rb") as fh:
        if fh.read(len(SQLITE_MAGIC)) != SQLITE_MAGIC:
            raise ProfileError(
                path, "not a SQLite file (expected an `nsys export --type sqlite` file)"
            )
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
    with closing(nsys.connect(f"{path.resolve().as_uri()}?mode=ro", views)) as con:
        return job(con, *args)


def with_capture(profile: RankProfile, capture: str | None) -> RankProfile:
    """The nsys profile with its wall chosen for `capture` (the run's mode; None: what the export
    records; module docstring), placed on the clock (span_ns[SPAN_WALL], the breakdown's window)
    and widened to hold every CUDA record (place_wall). Other sources unchanged."""
    if profile.source != "nsys":
        return profile
    origin = "nsys capture" if capture is not None else nsys.CAPTURE_TABLE  # as wall_from names it
    capture = capture if capture is not None else profile.file_capture
    order = (SPAN_SESSION, SPAN_ACTIVITY)
    if capture in (cap.CAPTURE_API, cap.CAPTURE_NVTX):
        order, why = (SPAN_ACTIVITY,), f"{origin}: {capture} window"
    elif capture in (cap.CAPTURE_DURATION, cap.CAPTURE_WHOLE):
        why = f"{origin}: {capture}"
    elif capture is None:
        why = NSYS_DEFAULT
    else:
        why = f"{origin}: trigger {capture!r} not understood, so nsys default: whole session"
    name = next((n for n in order if profile.spans.get(n, 0) > 0), "")
    places = {k: v for k, v in profile.span_ns.items() if k != SPAN_WALL}
    if not name:
        return dataclasses.replace(profile, wall_s=0.0, wall_from="", span_ns=places)
    (lo, hi), note = cap.place_wall(name, places, profile.outside)
    places[SPAN_WALL] = (lo, hi)
    return dataclasses.replace(
        profile, wall_s=(hi - lo) / _NS_PER_S, wall_from=f"{name} ({why}){note}", span_ns=places
    )


def _read(
    con: sqlite3.Connection, path: Path, jobs: Sequence[Job], counted: Callable | None = None
) -> tuple[RankProfile, list]:
    columns = nsys.schema(con)
    if nsys.STRINGS not in columns:
        raise ProfileError(
            path, "SQLite file of another schema: no StringIds table, not an nsys export"
        )
    activity = [t for t in nsys.CUDA_TABLES if t in columns]
    for table in [nsys.STRINGS, *activity]:
        missing = [c for c in nsys.REQUIRED[table] if c not in columns[table]]
        if missing:
            raise ProfileError(path, f"SQLite file of another schema: {table} lacks {missing}")
    if not activity:
        # An nsys run needs CUDA (run.node.profiling); with no CUDA table at all the capture range
        # never opened or CUDA was not traced, and every metric would be a silent absence.
        raise ProfileError(
            path,
            f"nsys export without CUDA tables ({', '.join(nsys.CUDA_TABLES)}): nothing was traced "
            "(was --trace=cuda on, and did the capture range open?)",
        )
    session = cap.session_span(con, columns)
    session_ns = session[1] - session[0] if session else 0
    # Read before the long work: a capture table that contradicts itself ends the read at once.
    capture = cap.file_capture(con, columns, path, session_ns)

    spans: list[tuple[int, int]] = []  # (min start, max end) per group, for the activity span
    name_col = nsys.kernel_name_column(columns)
    if nsys.KERNEL in columns and name_col is None:
        raise ProfileError(path, f"SQLite file of another schema: {nsys.KERNEL} has no name column")
    tables = []
    if nsys.RUNTIME in columns:
        calls = (nsys.runtime_calls(con, columns), "nameId", runtime_metric, "<nameId {}>")
        tables.append((nsys.RUNTIME, _named_rows, calls))
    if nsys.KERNEL in columns:
        tables.append((nsys.KERNEL, _named_rows, (nsys.KERNEL, name_col, nccl_metric, "")))
    if nsys.MEMCPY in columns:
        tables.append((nsys.MEMCPY, _memcpy_rows, (columns,)))
    # Each GROUP BY is a sort of its whole table, most of the read time; SQLite runs them side by
    # side on their own connections (it releases the GIL), so the cores share them, and the jobs
    # (the breakdown's scans) with them. The jobs may count the GROUP BYs (`counted`): the calls'
    # where they are told apart by their class (the rows are read in stored order then).
    by_job = {nsys.KERNEL, nsys.MEMCPY} | (
        {nsys.RUNTIME} if nsys.call_rows(con, columns) is not None else set()
    )
    where = (path, nsys.temp_views(con))
    with ThreadPoolExecutor(len(tables) + len(jobs)) as pool:
        extra = [pool.submit(_on_own_connection, where, job, columns) for job in jobs]
        groups = [
            None if counted and table in by_job else
            pool.submit(_on_own_connection, where, fn, spans, None, *args)
            for table, fn, args in tables
        ]  # fmt: skip
        results = [job.result() for job in extra]
        rows = [
            row for (table, fn, args), job in zip(tables, groups, strict=True)
            for row in (job.result() if job else fn(con, spans, counted(table), *args))
        ]  # fmt: skip
    if {"start", "end"} <= columns.get(nsys.MEMSET, set()):
        lo, hi = con.execute(f'SELECT MIN(start), MAX("end") FROM {nsys.MEMSET}').fetchone()
        if lo is not None and hi is not None:
            spans.append((lo, hi))

    places = {SPAN_SESSION: session} if session_ns > 0 else {}
    if spans:
        places[SPAN_ACTIVITY] = (min(s for s, _ in spans), max(e for _, e in spans))
    found = {name: (hi - lo) / _NS_PER_S for name, (lo, hi) in places.items()}
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
        outside=cap.records_outside(con, columns, places),
        device_kind="CUDA",
    )
    return profile, results


def _grouped(
    con: sqlite3.Connection,
    counted: dict[int, list] | None,
    source: str,
    key: str,
    count: str = "COUNT(*)",
    extra: str = "",
) -> list[tuple]:
    """(key, calls, total, min start, max end, ...) per key: read_nsys_with's `counted`, else a
    GROUP BY (one full scan; `end` is quoted because it is an SQL keyword)."""
    if counted is not None:
        return [(k, *values) for k, values in sorted(counted.items())]
    sql = (
        f'SELECT {key}, {count}, SUM("end" - start), MIN(start), MAX("end"){extra} '
        f"FROM {source} GROUP BY {key}"
    )
    return con.execute(sql).fetchall()


def _named_rows(con: sqlite3.Connection, spans: list[tuple[int, int]],
                counted: dict[int, list] | None, source: str, key: str,
                metric_of: Callable[[str], str | None], unnamed: str) -> list[Row]:  # fmt: skip
    """Metric rows of a table grouped by a StringIds id (calls, kernels)."""
    groups = _grouped(con, counted, source, key)
    names = nsys.strings(con, [g[0] for g in groups])
    rows = []
    for name_id, calls, total, lo, hi in groups:
        spans.append((lo, hi))
        raw = names.get(name_id, unnamed.format(name_id))
        metric = metric_of(raw)
        if metric:
            rows.append(Row(metric, raw, calls, (total or 0) / _NS_PER_S))
    return rows


def _memcpy_rows(
    con: sqlite3.Connection,
    spans: list[tuple[int, int]],
    counted: dict[int, list] | None,
    columns: dict[str, set[str]],
) -> list[Row]:
    # A batched record holds copyCount copies (at least 1: older rows may hold 0 or NULL); its
    # duration and bytes are the batch's, summed as recorded.
    count = (
        "SUM(MAX(COALESCE(copyCount, 1), 1))" if "copyCount" in columns[nsys.MEMCPY] else "COUNT(*)"
    )
    groups = _grouped(con, counted, nsys.MEMCPY, "copyKind", count, ', SUM("bytes")')
    labels = dict(CUPTI_COPY_KIND)
    if nsys.MEMCPY_ENUM in columns:
        label_col = "label" if "label" in columns[nsys.MEMCPY_ENUM] else "name"
        for kind_id, label in con.execute(f"SELECT id, {label_col} FROM {nsys.MEMCPY_ENUM}"):
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
    found = dict(
        nsys.name_values(con, columns, nsys.EXPORT_TABLE)
        or nsys.name_values(con, columns, nsys.OLD_EXPORT)
    )
    release = next((found[k] for k in _RELEASE_KEYS if found.get(k) is not None), None)
    return newer_version_note("nsys export of", release, NSYS_COVERED)
