"""The wall time inside each CPU op of a Kineto trace: the union of its calls' intervals.

Nested calls of the same name and calls on several threads at once count once (aten::conv1d
calling aten::conv1d, aten::copy_ on two threads), so an op's share is at most 1, where the sum
of inclusive times exceeds the window (1.49 and 1.96 on two real traces). Calls are counted as
recorded.

Kineto writes the CPU ops nearly in time order (a few thousand events shuffled between the main
and autograd threads), so they are folded as breakdown_kineto folds GPU intervals: every
FLUSH_EVENTS calls, sorted with those held back, the earlier half folded into one running union
per op (intervals.SortedUnion), the later half held back. A call starting before one already
folded for its op: result() raises ValueError and the trace is read again with keep_all (every
call kept, 24 bytes each, sorted once). Few calls, never flushed (intervals.fold_small), are
folded at the end in plain Python (intervals.small_unions, each op as a device).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable

from .intervals import SortedUnion, Unsorted, fold_small, small_unions, us_ns, us_to_ns

# Calls kept before a fold: a flush of 1 << 16 sorts some 7 MB. Half of it must cover how far out
# of order the CPU ops are written: 16,000 to 32,000 calls in HTA's own trace (1 << 15 had it
# read twice, the second time with keep_all).
FLUSH_EVENTS = 1 << 16


class CpuUnions:
    """(ts, dur) of CPU-op calls by op index; result(): each op's union in ns, rounded as
    breakdown.kineto_ns rounds Kineto's microseconds."""

    def __init__(self, key: Callable[[str], str], keep_all: bool = False) -> None:
        self.key, self.keep_all = key, keep_all
        self.every = float("inf") if keep_all else FLUSH_EVENTS
        self.ts, self.dur, self.op = array("d"), array("d"), array("i")  # op: an index
        self.ops: dict[str, int] = {}  # the op's name (key applied) -> its index
        self.unions: dict[int, SortedUnion] = {}
        self.held: tuple | None = None  # (starts, ends, ops) held back at the last flush
        self.in_order = True
        self.flushed = False

    def index(self, name: object) -> int:
        """The op index of a call of this name (one per name after `key`)."""
        return self.ops.setdefault(self.key(str(name)), len(self.ops))

    def flush(self, final: bool = False) -> None:
        """Fold what came so far, holding back the later half. The calls' arrays are emptied
        first and few copies made: this is a large trace's peak memory (the bench's)."""
        if self.keep_all and not final:
            return
        import numpy as np

        self.flushed = True
        starts = us_to_ns(np.frombuffer(self.ts, np.float64))
        ends = np.rint(np.frombuffer(self.dur, np.float64) * 1000).astype(np.int64)
        ends += starts  # in integers: a float sum at 1.7e18 ns is off by 128
        ops = np.array(self.op, dtype=np.int32)
        del self.ts[:], self.dur[:], self.op[:]
        if not self.in_order:
            return
        if self.held is not None:
            held, self.held = self.held, None
            starts, ends, ops = (
                np.concatenate(p) for p in zip(held, (starts, ends, ops), strict=True)
            )
        order = np.argsort(starts, kind="stable")
        cut = len(order) if final else len(order) // 2
        picked, rest = order[:cut], order[cut:]
        picked = picked[np.argsort(ops[picked], kind="stable")]  # by op, start order kept
        op_of = ops[picked]
        cuts = (np.flatnonzero(op_of[1:] != op_of[:-1]) + 1).tolist()
        try:
            for lo, hi in zip([0, *cuts], [*cuts, len(picked)], strict=True) if len(picked) else ():
                op, rows = int(op_of[lo]), picked[lo:hi]
                union = self.unions.get(op) or self.unions.setdefault(op, SortedUnion())
                union.add(starts[rows], ends[rows])
        except Unsorted:
            self.in_order, self.unions = False, {}
            return
        self.held = (starts[rest], ends[rest], ops[rest])

    def result(self) -> dict[str, int]:
        """Each op's union in ns, by name; ValueError where the calls came out of time order
        beyond the flush window."""
        if not self.flushed and fold_small(len(self.ts)):
            rows = [(start, start + round(d * 1000), op, 0)
                    for start, d, op in zip(map(us_ns, self.ts), self.dur, self.op, strict=True)]  # fmt: skip
            found = small_unions(rows)[0]
            return {name: found[i][0] for name, i in self.ops.items() if i in found}
        self.flush(final=True)
        if not self.in_order:
            raise ValueError("CPU ops out of time order beyond the flush window")
        return {name: self.unions[i].total for name, i in self.ops.items() if i in self.unions}
