"""The tidy metrics table (metrics.py) as plain rows, without pandas, for the reading path (CLI,
`cli diff`, the sweep's collect step): the reader installs and runs on numpy alone.
`metric_totals` and `with_launch_all` are metrics.by_metric and add_launch_all on rows;
`write_rows_atomic` writes what pandas reads back as the same values (tests hold them equal).
"""

from __future__ import annotations

import csv
import math
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import NamedTuple, TextIO

from .metrics import COLUMNS, KERNEL_LAUNCH_ALL, LAUNCH_APIS, WALL_COLUMNS, TidyRow, atomic_write


class MetricTotal(NamedTuple):
    """A metric's raw names summed within one (run, rank, source)."""

    run: str
    rank: int
    source: str
    metric: str
    calls: int
    total_s: float
    bytes: int | None
    share: float


def sort_rows(rows: Iterable[TidyRow]) -> list[TidyRow]:
    """A table's rows in its order: by run, rank and source, then by time spent (most first)."""
    return sorted(rows, key=lambda r: (r.run, r.rank, r.source, -r.total_s, r.metric, r.raw_name))


def metric_totals(rows: Iterable[TidyRow]) -> list[MetricTotal]:
    """One per (run, rank, source, metric), sorted so; bytes None where no row has bytes."""
    groups: dict[tuple, list[TidyRow]] = {}
    for r in rows:
        groups.setdefault((r.run, r.rank, r.source, r.metric), []).append(r)
    out = []
    for key in sorted(groups):
        sizes = [r.bytes for r in groups[key] if r.bytes is not None]
        out.append(_summed(key, groups[key], sum(sizes) if sizes else None))
    return out


def _summed(key: tuple, group: Sequence, nbytes: int | None) -> MetricTotal:
    calls, total_s = sum(r.calls for r in group), math.fsum(r.total_s for r in group)
    return MetricTotal(*key, calls, total_s, nbytes, math.fsum(r.share for r in group))


def with_launch_all(totals: Sequence[MetricTotal]) -> list[MetricTotal]:
    """The totals plus a KERNEL_LAUNCH_ALL row (sums over LAUNCH_APIS, replacing any) per (run,
    rank, source) with any launch."""
    base = [t for t in totals if t.metric != KERNEL_LAUNCH_ALL]
    sums: dict[tuple, list[MetricTotal]] = {}
    for t in base:
        if t.metric in LAUNCH_APIS:
            sums.setdefault((t.run, t.rank, t.source), []).append(t)
    return base + [_summed((*key, KERNEL_LAUNCH_ALL), g, None) for key, g in sorted(sums.items())]


def read_metrics_rows(path: str | os.PathLike[str]) -> list[TidyRow]:
    """The rows of a metrics CSV; OSError as open() raises it, ValueError (one line) for a file
    that is not one. Missing WALL_COLUMNS (a table built by hand) read as unknown (NaN, "")."""
    with open(path, newline="", encoding="utf-8") as fh:
        lines = csv.reader(fh)
        header = next(lines, None)
        if not header:
            raise ValueError("no header line")
        missing = [c for c in COLUMNS if c not in header]
        if missing:
            raise ValueError(f"no column {', '.join(missing)}")
        at = {c: header.index(c) for c in COLUMNS + WALL_COLUMNS if c in header}
        rows = []
        for n, cells in enumerate(lines, start=2):
            if not cells:
                continue
            if len(cells) > len(header):
                raise ValueError(f"line {n} has {len(cells)} fields, the header {len(header)}")
            cells += [""] * (len(header) - len(cells))
            try:
                rows.append(TidyRow(**{c: _PARSE[c](cells[i]) for c, i in at.items()}))
            except ValueError as exc:
                raise ValueError(f"line {n}: {exc}") from None
        return rows


def _whole(text: str) -> int:
    value = float(text)  # "3" and "3.0" alike; "" and "nan" refused below
    if not value.is_integer():
        raise ValueError(f"not a whole number: {text!r}")
    return int(value)


def _number(text: str) -> float:
    return float(text) if text else math.nan


_PARSE: dict[str, Callable[[str], object]] = {
    **dict.fromkeys(("run", "source", "metric", "raw_name", "wall_from", "device_kind"), str),
    **dict.fromkeys(("rank", "calls"), _whole),
    **dict.fromkeys(("total_s", "share", "wall_s", "activity_s"), _number),
    "bytes": lambda text: _whole(text) if text else None,
}


def write_rows_atomic(
    path: str | os.PathLike[str], columns: Sequence[str], rows: Iterable[Sequence]
) -> Path:
    """Write rows as CSV atomically, as pandas' to_csv would: floats as repr, NaN and None empty,
    "\\n" line ends."""

    def write(fh: TextIO) -> None:
        out = csv.writer(fh, lineterminator="\n")
        out.writerow(columns)
        out.writerows([_cell(v) for v in row] for row in rows)

    return atomic_write(path, write)


def write_tables(tables: Sequence[tuple[str, Sequence[str], list]]) -> bool:
    """Write (path, columns, rows) tables; False after one error line if one cannot be."""
    for dest, columns, rows in tables:
        try:
            write_rows_atomic(dest, columns, rows)
        except OSError as exc:
            print(f"error: {dest}: cannot write ({exc.strerror or exc})", file=sys.stderr)
            return False
    return True


def _cell(value: object) -> object:
    if value is None:
        return ""
    if isinstance(value, float):  # numpy's float64 too, whose repr names its type
        return "" if math.isnan(value) else repr(float(value))
    return value
