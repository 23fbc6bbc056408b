"""The outcome of one rule on one table, and the noise a comparison must clear (rules.py's
docstring says when a comparison is firm)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Outcome:
    ok: bool | None  # None: nothing to judge
    facts: list[str] = field(default_factory=list)
    values: list[float] = field(default_factory=list)  # the primary numbers (for ranges)
    why: str = ""  # when ok is None
    gpus: set[float] = field(default_factory=set)
    weak_pass: bool = False  # a comparison that passed on medians but not across the spreads
    weak_fail: bool = False  # one that failed on medians but not across the spreads
    firm_fail: bool = False  # one that failed whichever repeats are taken
    cells: list[tuple[bool, bool]] = field(default_factory=list)  # (passed, firm) per check
    cell_text: str = ""  # how many cells passed, and how many had to
    runs: set[str] = field(default_factory=set)  # the runs behind the numbers
    quiet: bool = False  # some comparison was inside the run-to-run noise
    # each comparison's distance from what it was compared with (relative, and absolute: in
    # points for accuracy) and whether it passed
    gaps: list[tuple[float, float, bool | None]] = field(default_factory=list)
    _pending: tuple[float, float] | None = None

    def gap(self, x: float, ref: float) -> None:
        """Record how far the next checked value sits from what it is compared with (relative to
        it): the margin the summary sets against the noise."""
        if ref and math.isfinite(x) and math.isfinite(ref):
            self.note(abs(x - ref) / abs(ref), abs(x - ref))

    def note(self, distance: float, absolute: float = math.nan) -> None:
        """A relative distance (and the absolute one) for the next check()."""
        self._pending = (distance, absolute)

    def deciding_gap(self, verdict_ok: bool | None, points: bool = False) -> float | None:
        """The distance that decided (absolute with `points`, else relative): the smallest of
        the passing comparisons when the claim holds (its closest call), the largest failing
        one when it does not (the clearest failure), else the smallest of all."""
        k = 1 if points else 0
        gaps = [(g[k], ok) for *g, ok in self.gaps if g[k] == g[k]]
        if not gaps:
            return None
        passed = [g for g, ok in gaps if ok is not False]
        failed = [g for g, ok in gaps if ok is False]
        if verdict_ok is False and failed:
            return max(failed)
        if verdict_ok is True and passed:
            return min(passed)
        return min(g for g, _ in gaps)

    def check(self, good: bool, firm: bool) -> None:
        """One comparison: `good` on the medians; `firm` when every end of the repeats' spreads
        (or the stated noise floor) gives the same answer."""
        self.ok = bool(self.ok and good)
        self.cells.append((good, firm))
        if self._pending is not None:
            self.gaps.append((*self._pending, good))
            self._pending = None
        if good:
            self.weak_pass |= not firm
        elif firm:
            self.firm_fail = True
        else:
            self.weak_fail = True

    def settle(self, mode: str) -> None:
        """Decide on the cells as `mode` says (claims.yaml `cells`); `all` is check()'s own."""
        n, passed = len(self.cells), sum(g for g, _ in self.cells)
        if not n or self.ok is None:
            return
        if mode == "majority":
            need = n // 2 + 1
            firm_pass = sum(g and f for g, f in self.cells)
            firm_fail = sum(not g and f for g, f in self.cells)
            self.ok = passed >= need
            decided = firm_pass >= need if self.ok else firm_fail > n - need
            self.weak_pass, self.weak_fail = self.ok and not decided, not self.ok and not decided
            self.firm_fail = not self.ok and decided
        must = {"all": "all must", "majority": f"more than half ({n // 2 + 1}) must",
                "aggregate": "the mean over them is judged"}[mode]  # fmt: skip
        unit = "cell" if n == 1 else "cells"
        self.cell_text = (f"{passed} of {n} {unit} pass; {must}" if mode != "aggregate"
                          else "judged on the mean over the cells")  # fmt: skip

    @property
    def overlap(self) -> bool:
        """Within the spread: a pass that is not firm, or failures that all are not firm. A rule
        that sets `ok` itself (ratios, spreads) decides firmly."""
        if self.ok:
            return self.weak_pass
        return self.weak_fail and not self.firm_fail


def margin(cl: dict[str, Any], *ns: float, ref: float | None = None) -> float:
    """The relative margin a comparison of these cells must clear: the run-to-run spread measured
    for the claim's quantity (the verdict's `_noise`; inf where it was not measured), unless every
    cell has repeats of its own (their min-max then speaks for them). A spread in points
    (`_noise_points`: accuracy) is taken relative to `ref`, the value compared with."""
    measured = cl.get("_noise")
    if measured is None or all(n > 1 for n in ns):
        return 0.0
    if cl.get("_noise_points") and not math.isinf(float(measured)):
        return float(measured) / abs(ref) if ref else math.inf
    return float(measured)


def within_noise(x: float, ref: float, margin: float) -> bool:
    """x within `margin` (relative) of ref: a difference the noise could make."""
    if margin <= 0:
        return False
    return math.isinf(margin) or abs(x - ref) <= margin * abs(ref)
