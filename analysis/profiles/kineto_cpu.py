"""The wall time inside each CPU op of a Kineto trace: the union of its calls' intervals.

A `cpu:<op>` row's time is the time during which the op ran on some thread, nested calls of the
same name and calls on several threads at once counted once (aten::conv1d calling aten::conv1d,
aten::copy_ on two threads): its share of the window is then at most 1, where the sum of the
calls' inclusive times exceeds the window (1.49 and 1.96 on two real traces). The calls are
counted as recorded.

Kineto writes the CPU ops nearly in time order (a few thousand events shuffled between the main
and the autograd thread), so they are folded as the time breakdown's GPU intervals are
(breakdown_kineto): kept as written until FLUSH_EVENTS of them have come, then sorted with what
was held back, the earlier half folded into one running union per op (intervals.SortedUnion) and
the later half held back. A call that starts before one already folded for its op makes the fold
impossible: result() raises ValueError and the trace is read again with keep_all, which keeps
every call (24 bytes each) and sorts them once at the end. Calls that never filled a flush, and
number no more than breakdown_kineto.SMALL, are folded at the end in plain Python, without numpy
(intervals.small_unions, one op at a time as if each op were a device).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from typing import TYPE_CHECKING

from .intervals import SortedUnion, Unsorted, small_unions, us_ns, us_to_ns

if TYPE_CHECKING:
    import numpy as np

FLUSH_EVENTS = 1 << 17
SMALL = 1 << 15  # as breakdown_kineto.SMALL


class CpuUnions:
    """Collects (ts, dur) of CPU-op calls by op (an index from `index`); result() gives each
    op's union in ns, rounded as breakdown.kineto_ns rounds Kineto's microseconds."""

    def __init__(self, key: Callable[[str], str], keep_all: bool = False) -> None:
        self.key, self.keep_all = key, keep_all
        self.every = float("inf") if keep_all else FLUSH_EVENTS
        self.ts, self.dur, self.op = array("d"), array("d"), array("q")
        self.ops: dict[str, int] = {}  # the op's name (key applied) -> its index
        self.unions: dict[int, SortedUnion] = {}
        self.held: np.ndarray | None = None  # the later half of the last flush (numpy's)
        self.in_order = True
        self.flushed = False

    def index(self, name: object) -> int:
        """The index of the op a call of this name belongs to (one per name after `key`)."""
        return self.ops.setdefault(self.key(str(name)), len(self.ops))

    def flush(self, final: bool = False) -> None:
        """Fold what came so far, holding back the later half (module docstring)."""
        if self.keep_all and not final:
            return
        import numpy as np

        self.flushed = True
        rows = np.empty((len(self.ts), 3), dtype=np.int64)
        rows[:, 0] = us_to_ns(np.frombuffer(self.ts, np.float64))
        dur = np.rint(np.frombuffer(self.dur, np.float64) * 1000).astype(np.int64)
        rows[:, 1] = rows[:, 0] + dur  # in integers: a float sum at 1.7e18 ns is off by 128
        rows[:, 2] = np.frombuffer(self.op, np.int64)
        del self.ts[:], self.dur[:], self.op[:]
        if not self.in_order:
            return
        rows = rows if self.held is None else np.concatenate([self.held, rows])
        rows = rows[np.argsort(rows[:, 0], kind="stable")]
        cut = len(rows) if final else len(rows) // 2
        try:
            self._fold(rows[:cut])
        except Unsorted:
            self.in_order, self.unions, self.held = False, {}, None
            return
        self.held = rows[cut:].copy()

    def _fold(self, rows: np.ndarray) -> None:
        """Fold rows sorted by start into each op's union (grouped by op, start order kept)."""
        import numpy as np

        if not len(rows):
            return
        rows = rows[np.argsort(rows[:, 2], kind="stable")]
        ops, first = np.unique(rows[:, 2], return_index=True)
        for op, lo, hi in zip(ops.tolist(), first.tolist(), [*first[1:].tolist(), len(rows)],
                              strict=True):  # fmt: skip
            union = self.unions.get(op) or self.unions.setdefault(op, SortedUnion())
            union.add(rows[lo:hi, 0], rows[lo:hi, 1])

    def result(self) -> dict[str, int]:
        """Each op's union in ns, by name; ValueError where the calls came out of time order
        beyond the flush window (read the trace again with keep_all)."""
        if not self.flushed and len(self.ts) <= SMALL:
            rows = [(start, start + round(d * 1000), op, 0)
                    for start, d, op in zip(map(us_ns, self.ts), self.dur, self.op, strict=True)]  # fmt: skip
            found = small_unions(rows)[0]
            return {name: found[i][0] for name, i in self.ops.items() if i in found}
        self.flush(final=True)
        if not self.in_order:
            raise ValueError("CPU ops out of time order beyond the flush window")
        return {name: self.unions[i].total for name, i in self.ops.items() if i in self.unions}
