"""The interval unions of a Kineto trace, collected while torch_trace reads its events for the
metrics: the time breakdown's (KinetoIntervals, fed by kineto_fold.fold; breakdown.read_torch) and the
wall time inside each CPU op (CpuUnions).

Kineto writes events nearly in time order, a little shuffled between streams and threads. So the
intervals are kept as written (float us) until `every` have come, then turned into integer ns
(rounded as breakdown.py says), sorted with what was held back, and the earlier half folded
into running unions (intervals.fold_rows) while the later half waits for events still to come: a
few MB whatever the trace's size. Disorder deeper than half a flush makes the fold impossible:
`in_order` turns False and the caller reads the trace again with keep_all, which keeps every
interval and folds them once at the end. A small trace is folded at the end in plain Python
(intervals.small_unions): importing numpy costs more than its whole reading.

A CPU op's time is the union of its calls (each op folded as a device of its own): nested calls
of the same name and calls on several threads at once count once (aten::conv1d calling
aten::conv1d, aten::copy_ on two threads), so an op's share is at most 1, where the sum of
inclusive times exceeds the window (1.49 and 1.96 on two real traces).
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
# CPU-op calls kept before a fold: half of it must cover how far out of order the CPU ops are
# written, 16,000 to 32,000 calls in HTA's own trace (1 << 15 had it read twice, the second time
# with keep_all).
CPU_FLUSH_EVENTS = 1 << 16
# cat -> kind code (kernel: 0/1), with torch 1.8-1.10's capitalised names (kineto_fold)
KINETO_GPU = {"kernel": None, "gpu_memcpy": 2, "gpu_memset": 3, "Kernel": None, "Memcpy": 2,
              "Memset": 3}  # fmt: skip
KINETO_HOST = frozenset({"cuda_runtime", "cuda_driver", "Runtime"})
_HOST = -(1 << 62)  # the host calls' place among the devices while folding
_NOTHING = -(1 << 63)  # below any end (an int64's least)


class Fold:
    """(ts, dur) arrays by (key, kind code), folded as intervals.fold_rows folds devices; held
    back by key (by_key) or all together."""

    by_key = True

    def __init__(self, every: int, keep_all: bool) -> None:
        self.keep_all = keep_all
        self.every = math.inf if keep_all else every  # flush after this many kept events
        self.groups: dict[tuple[int, int], tuple[array, array]] = {}
        self.held: dict[int, np.ndarray] = {}  # key -> (start, end, key, code) rows held back
        self.acc: dict[int, tuple] = {}
        self.last_end = _NOTHING
        self.in_order = True
        self.flushed = False  # whether a flush folded anything (then no small fold at the end)
        self.small: tuple | None = None  # finish's small fold: (found, last end)

    def arrays(self, key: int, code: int) -> tuple[array, array]:
        return self.groups.setdefault((key, code), (array("d"), array("d")))

    def flush(self, final: bool = False) -> None:
        if self.keep_all and not final:
            return
        import numpy as np

        self.flushed = True
        parts: dict[int, list[np.ndarray]] = {}
        for (key, code), pair in self.groups.items():
            if self.in_order:
                rows = _rows(pair, key, code)
                parts.setdefault(key if self.by_key else 0, []).append(rows)
                self.last_end = max(self.last_end, int(rows[:, 1].max(initial=_NOTHING)))
            # emptied in place: the reader holds on to these arrays (one lookup per name)
            del pair[0][:], pair[1][:]
        if not self.in_order:
            return  # to be read again with keep_all: nothing here is needed
        for key in set(parts) | (set(self.held) if final else set()):
            rows = np.concatenate(
                [self.held.pop(key, np.empty((0, 4), np.int64)), *parts.get(key, [])]
            )
            rows = rows[np.argsort(rows[:, 0], kind="stable")]
            cut = len(rows) if final else len(rows) // 2
            try:
                self.fold(rows[:cut])
            except intervals.Unsorted:
                self.in_order, self.held, self.acc = False, {}, {}
                return
            if cut < len(rows):
                self.held[key] = rows[cut:].copy()

    def fold(self, rows: np.ndarray) -> None:
        intervals.fold_rows(self.acc, rows)

    def finish(self) -> bool:
        """The last fold; False where the events came out of time order beyond the flush window."""
        count = sum(len(ts) for ts, _ in self.groups.values())
        if not self.flushed and intervals.fold_small(count):
            us_ns = intervals.us_ns  # the same ns as _rows, one interval at a time
            ns_rows = [
                (start, start + round(d * 1000), key, code)
                for (key, code), (ts, dur) in self.groups.items()
                for start, d in zip(map(us_ns, ts), dur, strict=True)
            ]
            self.small = intervals.small_unions(ns_rows)
        else:
            self.flush(final=True)
        return self.in_order


class KinetoIntervals(Fold):
    """A trace's GPU intervals by device and its blocking host calls, as kineto_fold.fold feeds
    them: keep(cat, name), asked once per (category, name) of `cats`, gives None or for a device
    (None: host calls) the arrays that get each event's ts and dur (dur < 0 left out); flush()
    after every `every` events kept; spans(...) at the end (first ts, latest end, that event's
    ts and dur of `cats`); finish() False: read the trace again with a feed made for keep_all."""

    cats = frozenset(KINETO_GPU) | KINETO_HOST

    def __init__(
        self,
        is_blocking: Callable[[str], bool],
        is_comm: Callable[[str], bool],
        keep_all: bool = False,
    ) -> None:
        super().__init__(FLUSH_EVENTS, keep_all)
        self.is_blocking, self.is_comm = is_blocking, is_comm
        self.span = (math.inf, -math.inf, 0.0, 0.0)

    def spans(self, lo: float, hi: float, hi_ts: float, hi_dur: float) -> None:
        self.span = (lo, hi, hi_ts, hi_dur)

    def keep(self, cat: str, name: object) -> Callable[[object], tuple[array, array]] | None:
        if cat in KINETO_HOST:
            return (lambda _: self.arrays(_HOST, 0)) if self.is_blocking(str(name or "")) else None
        code = KINETO_GPU[cat]
        if code is None:
            code = 1 if self.is_comm(str(name or "")) else 0
        return lambda dev: self.arrays(int(dev), code)

    def result(self) -> tuple[dict[int, tuple[int, ...]], int, tuple[int, int] | None]:
        """(per device the busy, compute, comm and kernel unions then the kernel, copy and memset
        counts; host blocked; activity [lo, hi) or None), in ns, after finish()."""
        if self.small is None:
            found = intervals.totals(self.acc)
        else:
            found, self.last_end = dict(self.small[0]), max(self.last_end, self.small[1])
        host = found.pop(_HOST, (0, 0, 0, 0))[0]
        lo, hi, hi_ts, hi_dur = self.span
        if lo > hi:
            return found, host, None
        # the last end: exact for kept work; else that of the latest one in float us
        start = intervals.us_ns(hi_ts)
        return found, host, (intervals.us_ns(lo), max(start + round(hi_dur * 1000), self.last_end))


class CpuUnions(Fold):
    """Each CPU op's calls; result(): its union in ns, by name (`key` applied to its names)."""

    by_key = False  # the ops are written nearly in time order together, not each apart

    def __init__(self, key: Callable[[str], str], keep_all: bool = False) -> None:
        super().__init__(CPU_FLUSH_EVENTS, keep_all)
        self.key = key
        self.ops: dict[str, int] = {}  # the op's name (key applied) -> its index

    def calls(self, name: object) -> tuple[array, array]:
        """The (ts, dur) arrays of the op a call of this name is."""
        return self.arrays(self.ops.setdefault(self.key(str(name)), len(self.ops)), 0)

    def result(self) -> dict[str, int]:
        """ValueError where the calls came out of time order beyond the flush window."""
        if not self.finish():
            raise ValueError("CPU ops out of time order beyond the flush window")
        if self.small is not None:
            return {name: self.small[0][i][0] for name, i in self.ops.items() if i in self.small[0]}
        return {name: self.acc[i].total for name, i in self.ops.items() if i in self.acc}

    def fold(self, rows: np.ndarray) -> None:
        """Into one union per op (column 2): nothing else is asked of them."""
        import numpy as np

        rows = rows[np.argsort(rows[:, 2], kind="stable")]  # by op, start order kept
        for part in np.split(rows, np.flatnonzero(np.diff(rows[:, 2])) + 1):
            if len(part):
                union = self.acc.setdefault(int(part[0, 2]), intervals.SortedUnion())
                union.add(part[:, 0], part[:, 1])


def _rows(pair: tuple[array, array], key: int, code: int) -> np.ndarray:
    import numpy as np

    ts, dur = np.frombuffer(pair[0], np.float64), np.frombuffer(pair[1], np.float64)
    rows = np.empty((len(ts), 4), dtype=np.int64)
    rows[:, 0] = intervals.us_to_ns(ts)
    rows[:, 1] = rows[:, 0] + np.rint(dur * 1000).astype(np.int64)
    rows[:, 2], rows[:, 3] = key, code
    return rows
