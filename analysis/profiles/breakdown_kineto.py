"""The time breakdown's intervals of a Kineto trace, collected while torch_trace reads its events
for the metrics (breakdown.read_torch): a kineto_fold.Feed.

Kineto writes events nearly in time order, a little shuffled between streams and threads. So the
intervals are kept as written (float us) until FLUSH_EVENTS have come, then turned into integer
ns, sorted with what was held back, and the earlier half folded into running unions while the
later half waits for events still to come: a few MB whatever the trace's size. Disorder deeper
than half a flush makes the fold impossible: `in_order` turns False and the caller reads the trace
again with keep_all, which keeps every interval and sorts them once at the end. A small trace is
folded at the end in plain Python (intervals.small_unions): importing numpy costs more than its
whole reading.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable
from typing import TYPE_CHECKING

from . import intervals

if TYPE_CHECKING:
    import numpy as np

# Intervals kept before a fold: 1 << 15 sorts some 3 MB, so the peak is the same for a 50 MB trace
# as for a 500 MB one (the bench's flat memory).
FLUSH_EVENTS = 1 << 15
# cat -> kind code (kernel: 0/1), with torch 1.8-1.10's capitalised names (kineto_fold)
KINETO_GPU = {"kernel": None, "gpu_memcpy": 2, "gpu_memset": 3, "Kernel": None, "Memcpy": 2,
              "Memset": 3}  # fmt: skip
KINETO_HOST = frozenset({"cuda_runtime", "cuda_driver", "Runtime"})
_HOST = -(1 << 62)  # the host calls' place among the devices while folding
_NOTHING = -(1 << 63)  # below any end (an int64's least)


class KinetoIntervals:
    """kineto_fold.Feed: a trace's GPU intervals by device and its blocking host calls."""

    cats = frozenset(KINETO_GPU) | KINETO_HOST
    every: float  # kineto_fold.Feed: flush after this many kept events

    def __init__(
        self,
        is_blocking: Callable[[str], bool],
        is_comm: Callable[[str], bool],
        keep_all: bool = False,
    ) -> None:
        self.is_blocking, self.is_comm, self.keep_all = is_blocking, is_comm, keep_all
        self.every = math.inf if keep_all else FLUSH_EVENTS
        self.groups: dict[tuple[int, int], tuple[array, array]] = {}  # (device, code) -> ts, dur
        self.held: dict[int, np.ndarray] = {}  # device -> (start, end, device, code) rows
        self.acc: dict[int, tuple[intervals.SortedUnion, ...]] = {}
        self.span = (math.inf, -math.inf, 0.0, 0.0)
        self.last_end = _NOTHING
        self.in_order = True
        self.flushed = False  # whether a flush folded anything (then no small fold at the end)
        self.small: dict | None = None  # finish's small fold: (found, last end)

    def spans(self, lo: float, hi: float, hi_ts: float, hi_dur: float) -> None:
        self.span = (lo, hi, hi_ts, hi_dur)

    def keep(self, cat: str, name: object) -> Callable[[object], tuple[array, array]] | None:
        groups = self.groups
        if cat in KINETO_HOST:
            if not self.is_blocking(str(name or "")):
                return None
            return lambda _: groups.setdefault((_HOST, 0), (array("d"), array("d")))
        code = KINETO_GPU[cat]
        if code is None:
            code = 1 if self.is_comm(str(name or "")) else 0
        return lambda dev: groups.setdefault((int(dev), code), (array("d"), array("d")))

    def flush(self, final: bool = False) -> None:
        if self.keep_all:
            return
        import numpy as np

        self.flushed = True
        parts: dict[int, list[np.ndarray]] = {}
        for (dev, code), pair in self.groups.items():
            if self.in_order:
                parts.setdefault(dev, []).append(_rows(pair, dev, code))
                self.last_end = max(self.last_end, int(parts[dev][-1][:, 1].max(initial=_NOTHING)))
            # emptied in place: the reader holds on to these arrays (one lookup per name)
            del pair[0][:], pair[1][:]
        if not self.in_order:
            return  # to be read again with keep_all: nothing here is needed
        for dev in set(parts) | (set(self.held) if final else set()):
            rows = np.concatenate(
                [self.held.pop(dev, np.empty((0, 4), np.int64)), *parts.get(dev, [])]
            )
            rows = rows[np.argsort(rows[:, 0], kind="stable")]
            cut = len(rows) if final else len(rows) // 2
            try:
                intervals.fold_rows(self.acc, rows[:cut])
            except intervals.Unsorted:
                self.in_order, self.held, self.acc = False, {}, {}
                return
            if cut < len(rows):
                self.held[dev] = rows[cut:].copy()

    def finish(self) -> bool:
        """The last fold; False where the events came out of time order beyond the flush window."""
        count = sum(len(ts) for ts, _ in self.groups.values())
        if not self.flushed and intervals.fold_small(count):
            us_ns = intervals.us_ns  # the same ns as _rows, one interval at a time
            ns_rows = [
                (start, start + round(d * 1000), dev, code)
                for (dev, code), (ts, dur) in self.groups.items()
                for start, d in zip(map(us_ns, ts), dur, strict=True)
            ]
            self.small = intervals.small_unions(ns_rows)
        elif not self.keep_all:
            self.flush(final=True)
        return self.in_order

    def result(self) -> tuple[dict[int, tuple[int, ...]], int, tuple[int, int] | None]:
        """(per device the busy, compute, comm and kernel unions then the kernel, copy and memset
        counts; host blocked; activity [lo, hi) or None), in ns; ValueError if out of order."""
        if self.small is not None:
            found, last_end = self.small
            found = dict(found)
            self.last_end = max(self.last_end, last_end)
        elif self.keep_all:
            found = _sorted_at_end(self.groups)
            self.last_end = max(self.last_end, found.pop("last_end"))
        else:
            if not self.in_order:
                raise ValueError("events out of time order beyond the flush window")
            found = intervals.totals(self.acc)
        host = found.pop(_HOST, (0, 0, 0, 0))[0]
        lo, hi, hi_ts, hi_dur = self.span
        if lo > hi:
            return found, host, None
        # the last end: exact for kept work; else that of the latest one in float us
        start = intervals.us_ns(hi_ts)
        return found, host, (intervals.us_ns(lo), max(start + round(hi_dur * 1000), self.last_end))


def _rows(pair: tuple[array, array], dev: int, code: int) -> np.ndarray:
    import numpy as np

    ts, dur = np.frombuffer(pair[0], np.float64), np.frombuffer(pair[1], np.float64)
    rows = np.empty((len(ts), 4), dtype=np.int64)
    rows[:, 0] = intervals.us_to_ns(ts)
    rows[:, 1] = rows[:, 0] + np.rint(dur * 1000).astype(np.int64)
    rows[:, 2], rows[:, 3] = dev, code
    return rows


def _sorted_at_end(groups: dict[tuple[int, int], tuple[array, array]]) -> dict:
    """keep_all's unions: merged where each group is in time order, else sorted and swept."""
    found: dict = {"last_end": _NOTHING}
    for dev in sorted({d for d, _ in groups}):
        codes = [c for c in range(4) if (dev, c) in groups]
        rows = [_rows(groups.pop((dev, c)), dev, c) for c in codes]
        found["last_end"] = max([found["last_end"], *(int(r[:, 1].max()) for r in rows if len(r))])
        try:
            found[dev] = intervals.gpu_unions(intervals.merged([iter([r]) for r in rows]))[dev]
            continue
        except intervals.Unsorted:
            pass
        union = []
        for want in ((0, 1, 2, 3), (0,), (1,), (0, 1)):
            pick = [r for r, c in zip(rows, codes, strict=True) if c in want]
            union.append(intervals.sorted_union([r[:, 0].copy() for r in pick],
                                                [r[:, 1].copy() for r in pick]))  # fmt: skip
        count = dict(zip(codes, map(len, rows), strict=True))
        counts = (count.get(0, 0) + count.get(1, 0), count.get(2, 0), count.get(3, 0))
        found[dev] = (*union, *counts)
    return found
