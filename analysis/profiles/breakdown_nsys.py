"""The time breakdown's scans of an nsys export, run beside the metrics' aggregations in
nsys_sqlite's pool of read-only connections (breakdown.read_nsys).

Each GPU table is read in stored order in chunks, on a connection of its own (_ahead), checked
sorted by start (nsys writes records so) and merged with the others chunk by chunk: memory is
about one chunk per table whatever the file size. A table found out of order is read again with
ORDER BY, so the result never depends on the order. The same rows give the metrics' GROUP BYs of
the call, kernel and copy tables (`counted`), so each is read once, with no sort.
"""

from __future__ import annotations

import queue
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import closing, suppress
from functools import partial
from pathlib import Path

import numpy as np

from . import nsys_schema as nsys
from .intervals import SortedUnion, Unsorted, gpu_unions, merged

# Rows fetched from SQLite per chunk: a column of one fits a core's cache, and its texts and
# arrays are small enough for malloc to reuse (1 << 16 took a fifth longer, in page faults).
_ROWS = 1 << 14
_FAR = np.iinfo(np.int64).max
_END = object()  # the end of a table read ahead (_ahead)


def _device(cols: set[str]) -> str:
    # A NULL or missing deviceId (hand-made files) becomes -1: not guessed to be device 0.
    return "COALESCE(deviceId, -1)" if "deviceId" in cols else "-1"


def _chunks(con: sqlite3.Connection, sql: str) -> Iterator[np.ndarray]:
    cur = con.execute(sql)
    while rows := cur.fetchmany(_ROWS):
        yield np.array(rows, dtype=np.int64).reshape(len(rows), -1)


def _stored(
    con: sqlite3.Connection,
    table: str,
    where: str,
    exprs: list[str],
    dropped: list[int],
    steady: tuple[str, int] | None = None,
) -> Iterator[np.ndarray]:
    """Rows of `table` in stored (rowid) order, _ROWS rowids at a time, as an int64 array.

    SQLite writes each column of a window as one text that numpy parses in C: a Python tuple per
    row cost more than the whole scan, and joining values row by row a third more. A row with a
    NULL value is left out, counted in `dropped`. steady: (expression, value) of a last column
    most tables hold one value of (the device): written only from the first window where a row
    holds another.
    """
    # Two subqueries: SQLite reads MIN(rowid) or MAX(rowid) alone off the b-tree, both in one
    # query by scanning the whole table.
    ends = f"SELECT (SELECT MIN(rowid) FROM {table}), (SELECT MAX(rowid) FROM {table})"
    lo, hi = con.execute(ends).fetchone()
    if lo is None:
        return
    rows = f"FROM {table} WHERE rowid >= ? AND rowid < ?{where}"
    head = f"SELECT COUNT(*), {', '.join(f'group_concat({e})' for e in exprs)}"
    sql, lean = f"{head} {rows}", ""
    if steady is not None:
        expr, value = steady
        lean = f"{head}, MAX(({expr}) IS NOT {int(value)}) {rows}"  # 1: a row holds another
        sql, exprs = f"{head}, group_concat({expr}) {rows}", [*exprs, expr]
    joined = " || ',' || ".join(f"({e})" for e in exprs)
    for first in range(lo, hi + 1, _ROWS):
        window = (first, first + _ROWS)
        count, *found = con.execute(lean or sql, window).fetchone()
        if lean and found.pop():
            lean = ""  # several values: written from here on
            count, *found = con.execute(sql, window).fetchone()
        if not count:
            continue
        parts = [np.fromstring(f or "", dtype=np.int64, sep=",") for f in found]
        parts += [np.full(count, value)] if lean else []
        if all(len(p) == count for p in parts):
            yield np.stack(parts).T  # each column contiguous
            continue
        (text,) = con.execute(f"SELECT group_concat({joined}) {rows}", window)
        part = np.fromstring(text[0] or "", dtype=np.int64, sep=",").reshape(-1, len(exprs))
        dropped.append(count - len(part))
        if len(part):  # each row whole or not at all
            yield part


def _gpu_rows(
    con: sqlite3.Connection,
    *,
    table: str,
    cols: set[str],
    kind: str,
    extra: list[str],
    dropped: list[int],
) -> Iterator[np.ndarray]:
    """(start, end, device, kind code, *extra) rows of one GPU table in stored order, written
    as short as SQLite can: starts past the table's first, durations, the device as steady."""
    dev = _device(cols)
    first = con.execute(f"SELECT start, {dev} FROM {table} ORDER BY rowid LIMIT 1").fetchone()
    if first is None:
        return
    base = int(first[0] or 0)  # any row's will do (only shorter to write): no MIN scan
    exprs = [f"start - {base}", '"end" - start', *([] if kind.isdigit() else [kind]), *extra]
    for part in _stored(con, table, "", exprs, dropped, (dev, first[1])):
        rows = np.empty((4 + len(extra), len(part)), dtype=np.int64).T  # columns contiguous
        rows[:, 0] = part[:, 0] + base
        rows[:, 1] = rows[:, 0] + part[:, 1]
        rows[:, 2] = part[:, -1]
        rows[:, 3] = int(kind) if kind.isdigit() else part[:, 2]
        rows[:, 4:] = part[:, len(exprs) - len(extra) : len(exprs)]
        yield rows


def nsys_gpu(
    con: sqlite3.Connection,
    columns: dict[str, set[str]],
    is_comm: Callable[[str], bool],
    counted: dict[str, dict[int, list[int]]],
) -> dict[int, tuple[int, ...]]:
    """Per device, the union lengths of (all GPU work, compute kernels, comm kernels, all
    kernels) in ns, then the (kernels, copies, memsets) records read.

    counted gets the kernel and copy tables' GROUP BYs: by table, key (name id,
    copyKind; NULL: -1) -> [calls, total ns, min start, max end, *sums (copies: bytes)]; a table
    with rows that did not read as numbers is left out (the GROUP BY counts them).
    """
    sources = []  # (table, column expressions: start, end, device, kind code, *extra)
    kcols = columns.get(nsys.KERNEL, set())
    name_col = nsys.kernel_name_column(columns)
    comm = np.empty(0, dtype=np.int64)
    if {"start", "end"} <= kcols and name_col:
        # NCCL names among all strings (a small table), not a DISTINCT over every kernel row.
        like = con.execute(f"SELECT id, value FROM {nsys.STRINGS} WHERE value LIKE '%nccl%'")
        comm = np.array([i for i, name in like if is_comm(str(name))], dtype=np.int64)
        name = f"COALESCE({name_col}, -1)"  # made the kind code (0 compute, 1 comm) by _tallied
        sources.append((nsys.KERNEL, ["start", '"end"', _device(kcols), name]))
    for table, code in ((nsys.MEMCPY, "2"), (nsys.MEMSET, "3")):
        cols = columns.get(table, set())
        if {"start", "end"} <= cols:
            extra = []
            if table == nsys.MEMCPY:  # as nsys_sqlite._memcpy_rows
                extra = ["COALESCE(copyKind, -1)", 'COALESCE("bytes", 0)']
                extra += ["MAX(COALESCE(copyCount, 1), 1)"] if "copyCount" in cols else []
            sources.append((table, ["start", '"end"', _device(cols), code, *extra]))
    dropped: dict[str, list[int]] = {}  # by table, rows left out for a NULL value (_stored)

    def streams(read: Callable[[str, list[str]], Iterator[np.ndarray]]) -> list:
        dropped.clear()
        for table in (nsys.KERNEL, nsys.MEMCPY):  # counted again (the host scan adds its own)
            counted.pop(table, None)
        return [_tallied(read(t, e), t, comm, counted) for t, e in sources]

    def stored(table: str, exprs: list[str]) -> Iterator[np.ndarray]:
        return _ahead(con, partial(_gpu_rows, table=table, cols=columns[table], kind=exprs[3],
                                   extra=exprs[4:], dropped=dropped.setdefault(table, [])))  # fmt: skip

    try:
        found = gpu_unions(merged(streams(stored)))
    except Unsorted:  # a table not stored in time order: SQLite sorts it (on disk if large)

        def by_start(t: str, e: list[str]) -> Iterator[np.ndarray]:
            return _chunks(con, f"SELECT {', '.join(e)} FROM {t} ORDER BY start")

        found = gpu_unions(merged(streams(by_start)))
    for table, lost in dropped.items():
        if any(lost):
            counted.pop(table, None)  # rows with a NULL value, never read: to the GROUP BY
    return found


def _ahead(
    con: sqlite3.Connection, read: Callable[[sqlite3.Connection], Iterator[np.ndarray]]
) -> Iterator[np.ndarray]:
    """read's chunks, read on a connection of its own in a thread, a chunk or two ahead: the
    tables are read side by side (SQLite releases the GIL) while this thread merges them."""
    where = next(row[2] for row in con.execute("PRAGMA database_list") if row[1] == "main")
    uri = f"{Path(where).resolve().as_uri()}?mode=ro"
    views = nsys.temp_views(con)
    box: queue.Queue = queue.Queue(maxsize=2)
    stop = threading.Event()

    def offer(item: object) -> bool:
        # never a blocking put: a reader that stopped early (finally below) must not wait on us
        while not stop.is_set():
            with suppress(queue.Full):
                box.put(item, timeout=0.05)
                return True
        return False

    def run() -> None:
        try:
            with closing(nsys.connect(uri, views)) as own:
                for chunk in read(own):
                    if not offer(chunk):
                        return
            offer(_END)
        except Exception as exc:  # noqa: BLE001 -- raised again in the reading thread
            offer(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    try:
        while (got := box.get()) is not _END:
            if isinstance(got, Exception):
                raise got
            yield got
    finally:
        stop.set()
        worker.join()


def _tallied(
    chunks: Iterable[np.ndarray],
    table: str,
    comm: np.ndarray,
    counted: dict[str, dict[int, list[int]]],
) -> Iterator[np.ndarray]:
    """(start, end, device, kind code) row chunks of one table, counted into `counted` on the
    way: a kernel's name id becomes 1 for an NCCL name, else 0; a copy's extra columns go."""
    kernels = table == nsys.KERNEL
    for rows in chunks:
        if table in (nsys.KERNEL, nsys.MEMCPY) and len(rows):
            groups = counted.setdefault(table, {})
            if kernels:
                _tally(groups, rows[:, 3], rows, None, ())
            else:
                _tally(groups, rows[:, 4], rows, rows[:, 6] if rows.shape[1] > 6 else None,
                       (rows[:, 5],))  # fmt: skip
        if kernels:
            rows[:, 3] = np.isin(rows[:, 3], comm)
        yield rows[:, :4]


def _tally(
    groups: dict[int, list[int]],
    keys: np.ndarray,
    rows: np.ndarray,
    calls: np.ndarray | None,
    sums: Iterable[np.ndarray],
) -> None:
    """Add rows to groups by key: [calls (one a row, or `calls` summed), total duration, min
    start, max end, *each of `sums` summed]."""
    low = int(keys.min())
    span = int(keys.max()) - low + 1
    if span <= max(len(keys), 1 << 16):  # ids close together (names, copy kinds): no sort
        inv = keys - low
        counts = np.bincount(inv, minlength=span)
        uniq = np.arange(low, low + span, dtype=np.int64)
    else:
        uniq, inv, counts = np.unique(keys, return_inverse=True, return_counts=True)

    def summed(weights: np.ndarray) -> np.ndarray:
        acc = np.zeros(len(uniq), dtype=np.int64)
        np.add.at(acc, inv, weights)
        return acc

    lo, hi = np.full(len(uniq), _FAR), np.full(len(uniq), -_FAR)
    np.minimum.at(lo, inv, rows[:, 0])
    np.maximum.at(hi, inv, rows[:, 1])
    calls = counts if calls is None else summed(calls)
    cols = (uniq, calls, summed(rows[:, 1] - rows[:, 0]), lo, hi, *map(summed, sums))
    found = counts > 0  # the keys present (all of them after np.unique)
    for key, *got in zip(*(c[found].tolist() for c in cols), strict=True):
        slot = groups.setdefault(key, got)
        if slot is not got:
            first, last = min(slot[2], got[2]), max(slot[3], got[3])
            slot[:] = [a + b for a, b in zip(slot, got, strict=True)]
            slot[2], slot[3] = first, last


def nsys_host(
    con: sqlite3.Connection,
    columns: dict[str, set[str]],
    is_blocking: Callable[[str], bool],
    counted: dict[str, dict[int, list[int]]],
) -> int:
    """Union of the blocking runtime and driver calls in ns (backtrace rows left out). counted
    gets the call rows' GROUP BY by nameId (NULL: -1), as nsys_gpu's, where the calls
    are told apart by their class (call_rows): then all of them are read."""
    if not {"start", "end", "nameId"} <= columns.get(nsys.RUNTIME, set()):
        return 0
    # Blocking names among all strings: the runtime table is the largest, never scanned for names.
    found = con.execute(f"SELECT id, value FROM {nsys.STRINGS} WHERE value LIKE 'cu%'")
    keep = [int(i) for i, name in found if is_blocking(str(name))]
    calls = nsys.call_rows(con, columns)
    if not keep and calls is None:
        return 0
    names = f"nameId IN ({','.join(map(str, keep)) or 'NULL'})"
    if calls is not None:  # stored order, read as text (see _stored); else SQLite pairs rows
        # Starts past the first row's (any row will do: only shorter to write) and durations.
        first = con.execute(f"SELECT start FROM {nsys.RUNTIME} LIMIT 1").fetchone()
        base = int(first[0]) if first else 0
        exprs = [f"start - {base}", '"end" - start', "COALESCE(nameId, -1)"]
        union, groups, dropped = SortedUnion(), {}, []
        for part in _stored(con, nsys.RUNTIME, f" AND {calls}", exprs, dropped):
            rows = np.empty((2, len(part)), dtype=np.int64).T  # columns contiguous
            rows[:, 0] = part[:, 0] + base
            rows[:, 1] = rows[:, 0] + part[:, 1]
            _tally(groups, part[:, 2], rows, None, ())
            rows = rows[np.isin(part[:, 2], keep)]
            if union is not None:
                try:
                    union.add(rows[:, 0], rows[:, 1])
                except Unsorted:
                    union = None  # stored out of time order: sorted below
        if not any(dropped):
            counted[nsys.RUNTIME] = groups
        if union is not None:
            return union.total
        if not keep:
            return 0
    sql = f'SELECT start, "end" FROM {nsys.runtime_calls(con, columns)} WHERE {names}'
    for order in ("", " ORDER BY start"):
        union = SortedUnion()
        try:
            for rows in _chunks(con, sql + order):
                union.add(rows[:, 0], rows[:, 1])
        except Unsorted:  # stored out of time order (or paired by thread, nsys 2022)
            continue
        return union.total
    raise AssertionError("SQLite returned rows out of ORDER BY order")
