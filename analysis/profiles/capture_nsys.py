"""What an nsys export records of its own capture: the session (ANALYSIS_DETAILS), the capture
mode its META_DATA_CAPTURE settings give (README, "How the nsys reader counts"), and where the
wall lies on the records' clock (place_wall).

The mode: a range start (cudaProfilerApi or NVTX, or CAPTURE_RANGE), however stopped: that
range. An Immediate or Delay start: CAPTURE_DURATION where stopped by a Duration or
RUN_DURATION_MS > 0 (nsys 2023.3-2025.5 write STOP_TRIGGER Delayed), else CAPTURE_WHOLE. An
unknown start trigger: returned as written (with_capture names it). Contradictions nsys could
not have recorded are a ProfileError: a WALL_SETTINGS name given twice with two values, a range
stop with a timer start or the other range kind, a Duration stop without a positive
RUN_DURATION_MS, a START_DELAY_MS at least as long as the session. A RUN_DURATION_MS longer than
the session is not one: the application exited first (the paper's "first 720 s" of a shorter
run).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from .metrics import SPAN_ACTIVITY, SPAN_SESSION, ProfileError
from .nsys_schema import (
    CAPTURE_TABLE,
    DETAILS,
    KERNEL,
    MEMCPY,
    MEMSET,
    RUNTIME,
    name_values,
    runtime_calls,
)

# How the summary names each table's records (RankProfile.outside).
_RECORD_KINDS = ((KERNEL, "kernels"), (RUNTIME, "calls"), (MEMCPY, "copies"), (MEMSET, "memsets"))
_ONE = {"kernels": "kernel", "calls": "call", "copies": "copy", "memsets": "memset"}
_NS_PER_S = 1e9
# The capture modes. The first three are what run/node/profiling.py writes to profiling.json
# (test_install holds them equal): the reader installed on its own has no run/ to import.
CAPTURE_API = "cudaProfilerApi"  # --capture-range=cudaProfilerApi
CAPTURE_DURATION = "duration"  # --duration from the start
CAPTURE_WHOLE = "whole run"  # neither: the whole run
CAPTURE_NVTX = "NVTX"  # a capture range opened by an NVTX range (--capture-range=nvtx)
_TIMER_STARTS = ("immediate", "delay", "delayed", "timer")
_EXIT_STOPS = ("", "none", "applicationexit", "exit", "application")
# The settings that decide the wall time.
WALL_SETTINGS = ("START_TRIGGER", "STOP_TRIGGER", "START_DELAY_MS", "RUN_DURATION_MS",
                 "CAPTURE_RANGE")  # fmt: skip


def session_span(con: sqlite3.Connection, columns: dict[str, set[str]]) -> tuple[int, int] | None:
    """The nsys session (ANALYSIS_DETAILS) as [start, stop) in ns, None when absent; (0, duration)
    where only its length is recorded (place_wall places it)."""
    cols = columns.get(DETAILS, set())
    if "startTime" in cols and "stopTime" in cols:
        lo, hi = con.execute(f"SELECT MIN(startTime), MAX(stopTime) FROM {DETAILS}").fetchone()
        if lo is not None and hi is not None and hi > lo:
            return int(lo), int(hi)
    if "duration" in cols:
        (dur,) = con.execute(f"SELECT MAX(duration) FROM {DETAILS}").fetchone()
        if dur and dur > 0:
            return 0, int(dur)
    return None


def place_wall(
    name: str, places: dict[str, tuple[int, int]], outside: dict[str, int]
) -> tuple[tuple[int, int], str]:
    """The wall [lo, hi) in ns for the span `name`, and what was done to it ("" if nothing).

    The session is where ANALYSIS_DETAILS puts it unless no CUDA record lies inside: then it is on
    another clock (a Windows export) or known by its length only, placed at the first record.
    Records outside it (some exports start kernels before startTime) widen it to the activity
    span, each kind counted in the note: none dropped, none counted twice.
    """
    act = places.get(SPAN_ACTIVITY)
    if name != SPAN_SESSION or act is None or SPAN_SESSION not in places:
        return places.get(name, act or (0, 0)), ""
    (lo, hi), (act_lo, act_hi) = places[SPAN_SESSION], act
    counted = ", ".join(
        f"{n} {_ONE.get(kind, kind) if n == 1 else kind}" for kind, n in outside.items()
    )
    counted = f"CUDA records ({counted})" if counted else "CUDA records"
    note = ""
    if hi <= act_lo or lo >= act_hi:
        note = (
            f", on another clock than its {counted}: none inside [{lo / _NS_PER_S:.3f},"
            f" {hi / _NS_PER_S:.3f}] s, so its length is placed at the first record"
        )
        lo, hi = act_lo, act_lo + hi - lo
        counted = "CUDA records"
    if act_lo < lo or act_hi > hi:
        extra = max(lo - act_lo, 0) + max(act_hi - hi, 0)
        note += (
            f", widened by {extra / _NS_PER_S:.6g} s to the {SPAN_ACTIVITY} to hold the"
            f" {counted} outside the session"
        )
        lo, hi = min(lo, act_lo), max(hi, act_hi)
    return (lo, hi), note


def records_outside(
    con: sqlite3.Connection, columns: dict[str, set[str]], places: dict[str, tuple[int, int]]
) -> dict[str, int]:
    """The CUDA records not wholly inside the session, by kind; {} without a scan where the
    activity span lies inside it (most exports)."""
    if SPAN_SESSION not in places or SPAN_ACTIVITY not in places:
        return {}
    (lo, hi), (act_lo, act_hi) = places[SPAN_SESSION], places[SPAN_ACTIVITY]
    if lo <= act_lo and act_hi <= hi:
        return {}
    found = {}
    for table, kind in _RECORD_KINDS:
        if {"start", "end"} <= columns.get(table, set()):
            source = runtime_calls(con, columns) if table == RUNTIME else table
            sql = f'SELECT COUNT(*) FROM {source} WHERE start < ? OR "end" > ?'
            (n,) = con.execute(sql, (lo, hi)).fetchone()
            if n:
                found[kind] = n
    return found


def _settings(con: sqlite3.Connection, columns: dict[str, set[str]], path: Path) -> dict[str, str]:
    """The WALL_SETTINGS the table records, name -> value."""
    found: dict[str, str] = {}
    for n, v in name_values(con, columns, CAPTURE_TABLE):
        name = "" if n is None else str(n).strip().upper()
        if name not in WALL_SETTINGS:
            continue
        value = "" if v is None else str(v).strip()
        if found.setdefault(name, value) != value:
            raise ProfileError(
                path,
                f"{CAPTURE_TABLE} contradicts itself: {name} is {found[name]!r} and {value!r}"
                " (nsys records it once)",
            )
    return found


def _range(text: str) -> str | None:
    low = text.lower().replace(" ", "")
    return CAPTURE_API if "cudaprofilerapi" in low else CAPTURE_NVTX if "nvtx" in low else None


def file_capture(
    con: sqlite3.Connection, columns: dict[str, set[str]], path: Path, session_ns: int = 0
) -> str | None:
    """The capture mode META_DATA_CAPTURE records, None where none; session_ns (0: unknown)
    refuses a start delay that outlasts the session."""
    found = _settings(con, columns, path)
    if not found:
        return None

    def bad(problem: str) -> ProfileError:
        return ProfileError(path, f"{CAPTURE_TABLE} contradicts itself: {problem}")

    # A capture range, where the file marks one, is what opened the recording whatever the trigger.
    marked = found.get("CAPTURE_RANGE", "")
    trigger = marked if marked.lower() not in ("", "none") else found.get("START_TRIGGER", "")
    stop = found.get("STOP_TRIGGER", "")
    start_range, stop_range = _range(trigger), _range(stop)
    stop_low = stop.lower().replace(" ", "")
    delay = int_or_zero(found.get("START_DELAY_MS", ""))
    duration = int_or_zero(found.get("RUN_DURATION_MS", ""))
    if stop_low == "duration" and duration <= 0:
        raise bad(
            f"STOP_TRIGGER is {stop!r} but RUN_DURATION_MS is {found.get('RUN_DURATION_MS')!r}"
        )
    if session_ns > 0 and delay * 1_000_000 >= session_ns:
        raise bad(
            f"START_DELAY_MS {delay} is not shorter than the session ({session_ns / 1e6:.3f} ms):"
            " nothing would have been recorded"
        )
    if start_range is not None:
        if stop_range not in (None, start_range):
            raise bad(f"a {start_range} start with a {stop_range} stop")
        return start_range
    low = trigger.lower().replace(" ", "")
    if stop_range is not None:
        if low in _TIMER_STARTS or not low:
            opener = f"START_TRIGGER {trigger!r} opens none" if low else "no START_TRIGGER"
            raise bad(f"STOP_TRIGGER {stop!r} closes a capture range, but {opener}")
        return trigger  # an unknown start: named by with_capture, never guessed
    if low in _TIMER_STARTS or (not low and duration > 0):
        return CAPTURE_DURATION if duration > 0 else CAPTURE_WHOLE
    if not low and stop_low in _EXIT_STOPS:
        return None  # stop settings alone say nothing the default does not
    return trigger or stop or None


def int_or_zero(text: str) -> int:
    try:
        return int(float(text))
    except (ValueError, OverflowError):  # "", "n/a", "inf": no duration to speak of
        return 0
