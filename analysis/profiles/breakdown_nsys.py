"""The time breakdown's scans of an nsys export, run beside the metrics' aggregations in
nsys_sqlite's pool of read-only connections (breakdown.read_nsys).

Each GPU table is read in its stored order in chunks of rows, checked sorted by start (nsys writes
records so) and merged with the others chunk by chunk (intervals.merged): memory is about one
chunk per table whatever the file size. A table found out of order is read again with ORDER BY
(SQLite sorts it, on disk if large), so the result never depends on the order.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Iterator

import numpy as np

from . import nsys_schema as nsys
from .intervals import SortedUnion, Unsorted, merged

_ROWS = 1 << 16  # rows fetched from SQLite per chunk


def _device(cols: set[str]) -> str:
    # A NULL or missing deviceId (hand-made files) becomes -1: not guessed to be device 0.
    return "COALESCE(deviceId, -1)" if "deviceId" in cols else "-1"


def _chunks(con: sqlite3.Connection, sql: str) -> Iterator[np.ndarray]:
    cur = con.execute(sql)
    while rows := cur.fetchmany(_ROWS):
        yield np.array(rows, dtype=np.int64).reshape(len(rows), -1)


def _stored(
    con: sqlite3.Connection, table: str, where: str, exprs: list[str]
) -> Iterator[np.ndarray]:
    """Rows of `table` in stored (rowid) order, _ROWS rowids at a time, as an int64 array.

    SQLite writes each window as one text that numpy parses in C: a Python tuple per row cost
    more than the whole scan, and each value written costs, so callers ask for few and short
    ones. Values must not be NULL (nsys declares these columns NOT NULL).
    """
    lo, hi = con.execute(f"SELECT MIN(rowid), MAX(rowid) FROM {table}").fetchone()
    if lo is None:
        return
    text = " || ',' || ".join(f"({e})" for e in exprs)
    sql = f"SELECT group_concat({text}, ',') FROM {table} WHERE rowid >= ? AND rowid < ?{where}"
    for first in range(lo, hi + 1, _ROWS):
        (found,) = con.execute(sql, (first, first + _ROWS)).fetchone()
        if found:
            yield np.fromstring(found, dtype=np.int64, sep=",").reshape(-1, len(exprs))


def _gpu_rows(
    con: sqlite3.Connection, table: str, cols: set[str], kind: str
) -> Iterator[np.ndarray]:
    """(start, end, device, kind code) rows of one GPU table in stored order, from as few and
    as short values as SQLite can write: starts past the table's first, durations, and the
    device only where the table holds several."""
    dev = _device(cols)
    sql = f"SELECT MIN({dev}), MAX({dev}), MIN(start) FROM {table}"
    first_dev, last_dev, base = con.execute(sql).fetchone()
    if base is None:
        return
    exprs = [f"start - {int(base)}", '"end" - start']
    exprs += [dev] if first_dev != last_dev else []
    exprs += [kind] if not kind.isdigit() else []
    for part in _stored(con, table, "", exprs):
        rows = np.empty((len(part), 4), dtype=np.int64)
        rows[:, 0] = part[:, 0] + int(base)
        rows[:, 1] = rows[:, 0] + part[:, 1]
        rows[:, 2] = part[:, 2] if first_dev != last_dev else first_dev
        rows[:, 3] = int(kind) if kind.isdigit() else part[:, -1]
        yield rows


def nsys_gpu(
    con: sqlite3.Connection, columns: dict[str, set[str]], is_comm: Callable[[str], bool]
) -> dict[int, tuple[int, int, int, int]]:
    """Per device, the union lengths of (all GPU work, compute kernels, comm kernels, all
    kernels) in ns; is_comm tells an NCCL kernel's name."""
    sources = []  # (table, column expressions)
    kcols = columns.get(nsys.KERNEL, set())
    name_col = nsys.kernel_name_column(columns)
    if {"start", "end"} <= kcols and name_col:
        # NCCL names among all strings (a small table), not a DISTINCT over every kernel row.
        like = con.execute(f"SELECT id, value FROM {nsys.STRINGS} WHERE value LIKE '%nccl%'")
        comm = ",".join(str(i) for i, name in like if is_comm(str(name))) or "NULL"
        kind = f"CASE WHEN {name_col} IN ({comm}) THEN 1 ELSE 0 END"
        sources.append((nsys.KERNEL, ["start", '"end"', _device(kcols), kind]))
    for table, code in ((nsys.MEMCPY, "2"), (nsys.MEMSET, "3")):
        cols = columns.get(table, set())
        if {"start", "end"} <= cols:
            sources.append((table, ["start", '"end"', _device(cols), code]))
    try:
        return gpu_unions(merged([_gpu_rows(con, t, columns[t], e[3]) for t, e in sources]))
    except Unsorted:  # a table not stored in time order: SQLite sorts it (on disk if large)
        sorted_sql = [f"SELECT {', '.join(e)} FROM {t} ORDER BY start" for t, e in sources]
        return gpu_unions(merged([_chunks(con, sql) for sql in sorted_sql]))


def gpu_unions(chunks: Iterable[np.ndarray]) -> dict[int, tuple[int, int, int, int]]:
    """Per device, the union lengths of (all GPU work, compute kernels, comm kernels, all
    kernels) of (start, end, device, kind code) row chunks sorted by start; Unsorted if not."""
    acc: dict[int, tuple[SortedUnion, ...]] = {}
    for rows in chunks:
        fold_rows(acc, rows)
    return totals(acc)


def fold_rows(acc: dict[int, tuple[SortedUnion, ...]], rows: np.ndarray) -> None:
    """Fold (start, end, device, kind code) rows sorted by start into per-device unions (busy,
    compute, comm, kernels); Unsorted where a row starts before one folded earlier."""
    if not len(rows):
        return
    devs = rows[:, 2]
    first = devs[0]
    groups = [(int(first), rows)] if (devs == first).all() else [
        (int(d), rows[devs == d]) for d in np.unique(devs)
    ]  # fmt: skip
    for dev, part in groups:
        busy, comp, comm, kernels = acc.get(dev) or acc.setdefault(
            dev, tuple(SortedUnion() for _ in range(4))
        )
        starts, ends, kind = part[:, 0], part[:, 1], part[:, 3]
        busy.add(starts, ends)
        for union, mask in ((comp, kind == 0), (comm, kind == 1), (kernels, kind < 2)):
            union.add(starts[mask], ends[mask])


def totals(acc: dict[int, tuple[SortedUnion, ...]]) -> dict[int, tuple[int, int, int, int]]:
    """fold_rows' unions as lengths in ns, by device."""
    return {dev: tuple(u.total for u in unions) for dev, unions in sorted(acc.items())}


def nsys_host(
    con: sqlite3.Connection, columns: dict[str, set[str]], is_blocking: Callable[[str], bool]
) -> int:
    """Union of the blocking runtime and driver calls in ns (one row per call: backtraces left
    out); is_blocking tells a blocking call's name."""
    if not {"start", "end", "nameId"} <= columns.get(nsys.RUNTIME, set()):
        return 0
    # Blocking names among all strings: the runtime table is the largest, never scanned for names.
    found = con.execute(f"SELECT id, value FROM {nsys.STRINGS} WHERE value LIKE 'cu%'")
    keep = [str(i) for i, name in found if is_blocking(str(name))]
    if not keep:
        return 0
    names = f"nameId IN ({','.join(keep)})"
    calls = nsys.call_rows(con, columns)
    if calls is not None:  # stored order, read as text (see _stored); else SQLite pairs rows
        # Starts past the first row's (any row will do: only shorter to write) and durations.
        first = con.execute(f"SELECT start FROM {nsys.RUNTIME} LIMIT 1").fetchone()
        base = int(first[0]) if first else 0
        exprs, union = [f"start - {base}", '"end" - start'], SortedUnion()
        try:
            for part in _stored(con, nsys.RUNTIME, f" AND {calls} AND {names}", exprs):
                starts = part[:, 0] + base
                union.add(starts, starts + part[:, 1])
            return union.total
        except Unsorted:
            pass  # stored out of time order: sorted below
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
