"""Interval unions over numpy chunks, for the time breakdown of large profiles.

Exact on integer ns; touching intervals count as one, empty or reversed records as nothing.
SortedUnion takes chunks sorted by start across chunks (an nsys table in its own order, or sorted
by SQLite), carrying only the reach so far: memory is one chunk. fold_rows folds a GPU's (start,
end, device, kind) rows into its four unions; small_unions does the same in plain Python for a
few rows in any order.

numpy is imported inside the functions, never with the module: a small Kineto trace is read
without it (its import is a third of a small file's start-up).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

_FAR_PAST = -(1 << 62)  # below any start, and far from overflowing an int64
# At most this many intervals are folded by small_unions rather than numpy (fold_small).
SMALL = 1 << 13
# Kineto's microseconds are scaled to ns in two parts, the whole multiples of this and the rest
# (us_to_ns): epoch-based timestamps (1.7e15 us, torch 1.8-1.9) times 1000 are past 2**53, where
# a float product is off by up to 128 ns.
_SPLIT_US = float(1 << 20)


def us_to_ns(us: np.ndarray) -> np.ndarray:
    """Kineto's float us as int64 ns, round(us * 1000) half to even as if exact: whole multiples
    of 2**20 us scale in integers, the rest (exact in a float) in floats."""
    import numpy as np

    base = us / _SPLIT_US  # in place from here: a large flush's peak memory is its temporaries
    np.floor(base, out=base)
    base *= _SPLIT_US
    rest = us - base
    rest *= 1000
    np.rint(rest, out=rest)
    ns = base.astype(np.int64)
    del base
    ns *= 1000
    ns += rest.astype(np.int64)
    return ns


def us_ns(us: float) -> int:
    """us_to_ns of one value (an int stays exact)."""
    base = math.floor(us / _SPLIT_US) * int(_SPLIT_US)
    return base * 1000 + round((us - base) * 1000)


class Unsorted(ValueError):
    """Input promised sorted by start was not."""


class SortedUnion:
    """Length of the union of intervals fed as (starts, ends) chunks in order of start."""

    __slots__ = ("last", "reach", "total")

    def __init__(self) -> None:
        self.total, self.reach, self.last = 0, _FAR_PAST, _FAR_PAST

    def add(self, starts: np.ndarray, ends: np.ndarray) -> None:
        import numpy as np

        if not len(starts):
            return
        if starts[0] < self.last or bool(np.any(starts[1:] < starts[:-1])):
            raise Unsorted("intervals not sorted by start")
        self.last = int(starts[-1])
        # reach before each interval: the furthest end of everything earlier
        reach = np.maximum.accumulate(ends)
        before = np.empty_like(reach)
        before[0] = self.reach
        np.maximum(reach[:-1], self.reach, out=before[1:])
        gain = ends - np.maximum(starts, before)
        self.total += int(gain[gain > 0].sum())
        self.reach = max(self.reach, int(reach[-1]))


def merged(streams: Sequence[Iterator[np.ndarray]]) -> Iterator[np.ndarray]:
    """Merge row-chunk streams (2-D int64, column 0 the start), each sorted by start, into one
    sorted stream; Unsorted where a stream is not. Rows are released up to the smallest last
    start buffered among live streams (nothing later starts before it): about one chunk each."""
    import numpy as np

    its = list(streams)
    bufs: list = [()] * len(its)
    done = [False] * len(its)
    last = [_FAR_PAST] * len(its)
    while True:
        for i, it in enumerate(its):
            while not done[i] and not len(bufs[i]):
                chunk = next(it, None)
                if chunk is None:
                    done[i] = True
                    break
                col = chunk[:, 0]
                if len(col) and (col[0] < last[i] or bool(np.any(col[1:] < col[:-1]))):
                    raise Unsorted("intervals not sorted by start")
                if len(col):
                    last[i] = int(col[-1])
                bufs[i] = chunk
        if not any(len(b) for b in bufs):
            return
        marks = [int(b[-1, 0]) for b, d in zip(bufs, done, strict=True) if len(b) and not d]
        mark = min(marks) if marks else None
        out = []
        for i, b in enumerate(bufs):
            if not len(b):
                continue
            cut = len(b) if mark is None else int(np.searchsorted(b[:, 0], mark, "right"))
            out.append(b[:cut])
            bufs[i] = b[cut:]
        rows = out[0] if len(out) == 1 else np.concatenate(out)
        yield rows if len(out) == 1 else rows[np.argsort(rows[:, 0], kind="stable")]


def gpu_unions(chunks: Iterable[np.ndarray]) -> dict[int, tuple[int, ...]]:
    """totals of fold_rows over row chunks sorted by start; Unsorted if not sorted."""
    acc: dict[int, tuple] = {}
    for rows in chunks:
        fold_rows(acc, rows)
    return totals(acc)


def fold_rows(acc: dict[int, tuple], rows: np.ndarray) -> None:
    """Fold (start, end, device, kind code) rows sorted by start into per-device unions (busy,
    compute, comm, kernels) and counts by kind code; Unsorted where a row starts before one
    folded earlier."""
    import numpy as np

    if not len(rows):
        return
    devs = rows[:, 2]
    first = devs[0]
    groups = [(int(first), rows)] if (devs == first).all() else [
        (int(d), rows[devs == d]) for d in np.unique(devs)
    ]  # fmt: skip
    for dev, part in groups:
        *unions, counts = acc.get(dev) or acc.setdefault(
            dev, (*(SortedUnion() for _ in range(4)), np.zeros(4, dtype=np.int64))
        )
        busy, comp, comm, kernels = unions
        starts, ends, kind = part[:, 0], part[:, 1], part[:, 3]
        busy.add(starts, ends)
        for union, mask in ((comp, kind == 0), (comm, kind == 1), (kernels, kind < 2)):
            union.add(starts[mask], ends[mask])
        counts += np.bincount(kind, minlength=4)[:4]


def totals(acc: dict[int, tuple]) -> dict[int, tuple[int, ...]]:
    """By device: fold_rows' union lengths in ns, then its (kernels, copies, memsets) counts."""
    return {
        dev: (*(u.total for u in found[:4]), int(found[4][:2].sum()), *map(int, found[4][2:]))
        for dev, found in sorted(acc.items())
    }


def fold_small(count: int) -> bool:
    """Whether `count` intervals are folded in plain Python (small_unions): few, and numpy not
    imported yet (its import costs more than folding a few thousand)."""
    return count <= SMALL and "numpy" not in sys.modules


def small_unions(rows: list[tuple[int, int, int, int]]) -> tuple[dict[int, tuple[int, ...]], int]:
    """totals of fold_rows on (start, end, device, kind code) rows in any order, in plain Python,
    and the latest end: each interval's gain over the reach of those starting before it."""
    found: dict[int, tuple[int, ...]] = {}
    last_end = -(1 << 63)
    rows.sort()
    by_dev: dict[int, list[tuple[int, int, int, int]]] = {}
    for row in rows:
        by_dev.setdefault(row[2], []).append(row)
    for dev in sorted(by_dev):
        totals, reach, counts = [0, 0, 0, 0], [_FAR_PAST] * 4, [0, 0, 0, 0]
        for start, end, _, kind in by_dev[dev]:
            counts[kind] += 1
            last_end = max(last_end, end)
            # the unions this interval is in: busy, then compute, comm, kernels (kinds 0 and 1)
            for u in (0, 1, 3) if kind == 0 else (0, 2, 3) if kind == 1 else (0,):
                lo = start if start > reach[u] else reach[u]
                if end > lo:
                    totals[u] += end - lo
                if end > reach[u]:
                    reach[u] = end
        found[dev] = (*totals, counts[0] + counts[1], counts[2], counts[3])
    return found, last_end
