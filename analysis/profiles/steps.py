"""Training steps: where they lie in a profile, and a profile's figures restricted to them (README,
"Step by step"). The file is read again with every record clipped to the window: an nsys export
through TEMP views over its CUDA tables, a Kineto trace by clipping its events as they are
decoded; a step's host records stay within its host range, its GPU work runs to the GPU range's
end. Each chosen step's own breakdown is one more reading of the file.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from itertools import groupby
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .breakdown import Breakdown, for_wall, read_nsys, read_torch
from .intervals import us_ns
from .kineto_fold import GPU_WORK_CATS
from .metrics import SPAN_WALL, ProfileError, RankProfile
from .torch_trace import iter_trace_events

if TYPE_CHECKING:
    import sqlite3

DEFAULT_RANGE = "ProfilerStep"
NVTX_TABLE = "NVTX_EVENTS"
_NS_PER_S = 1e9


class StepError(ValueError):
    """Steps asked for that a file does not hold; the message is one line naming the file."""


@dataclasses.dataclass(frozen=True)
class Step:
    """One step: [start, end) on the file's clock (nsys ns, Kineto us), and in ns."""

    number: int
    start: float
    end: float  # the later of the host range's end and the GPU range's
    start_ns: int
    end_ns: int
    host_end: float | None = None  # Kineto: the host range's end, where the GPU's reaches later


@dataclasses.dataclass(frozen=True)
class Choice:
    """The steps asked for: first..last (inclusive), in ranges named `name`."""

    first: int
    last: int
    name: str = DEFAULT_RANGE

    def numbers(self) -> range:
        return range(self.first, self.last + 1)

    def label(self, number: int | None = None) -> str:
        """How wall_from names the window (or one step of it)."""
        if number is not None or self.first == self.last:
            return f"step {self.first if number is None else number} ({self.name} ranges)"
        return f"steps {self.first}-{self.last} ({self.name} ranges)"


def step_numbers(text: str) -> tuple[int, int]:
    """`--step`'s value: "N" or "A-B" (A <= B), whole numbers >= 0; ValueError otherwise."""
    found = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", text)
    if not found:
        raise ValueError(f"must be N or A-B (whole numbers), got {text!r}")
    first = int(found.group(1))
    last = first if found.group(2) is None else int(found.group(2))
    if last < first:
        raise ValueError(f"runs backwards: {text!r}")
    return first, last


def kineto_steps(path: str | os.PathLike[str], name: str = DEFAULT_RANGE) -> dict[int, Step]:
    """A Kineto trace's NAME#N ranges; ProfileError on unreadable input."""
    pattern = re.compile(rf"{re.escape(name)}#(\d+)")
    host: dict[int, tuple[float, float]] = {}
    gpu: dict[int, float] = {}
    for ev in iter_trace_events(path):
        if not isinstance(ev, dict) or ev.get("ph") != "X":
            continue
        found = pattern.fullmatch(str(ev.get("name", "")))
        ts, dur = ev.get("ts"), ev.get("dur") or 0
        if found is None or not isinstance(ts, int | float) or not isinstance(dur, int | float):
            continue
        n = int(found.group(1))
        if ev.get("cat") == "gpu_user_annotation":
            gpu[n] = max(gpu.get(n, ts + dur), ts + dur)
        else:
            lo, hi = host.get(n, (ts, ts + dur))
            host[n] = (min(lo, ts), max(hi, ts + dur))
    steps = {}
    for n, (lo, hi) in sorted(host.items()):
        end = max(hi, gpu.get(n, hi))
        steps[n] = Step(n, lo, end, us_ns(lo), us_ns(end), hi if end > hi else None)
    return steps


def nvtx_steps(path: str | os.PathLike[str], name: str = DEFAULT_RANGE) -> dict[int, Step]:
    """An nsys export's NVTX ranges named NAME; StepError naming its ranges where none is so
    named, ProfileError on unreadable input."""
    import sqlite3  # the nsys readers' imports, where an export is read (a Kineto trace needs none)
    from contextlib import closing

    from .nsys_schema import STRINGS, schema

    path = Path(path)
    try:
        with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as con:
            cols = schema(con).get(NVTX_TABLE, set())
            if not {"start", "end"} <= cols:
                raise StepError(f"{path}: no NVTX ranges in this export (nsys --trace=nvtx)")
            text = "text" if "text" in cols else "NULL"
            if "textId" in cols:
                text = f"COALESCE({text}, (SELECT value FROM {STRINGS} WHERE id = textId))"
            rows = con.execute(
                f'SELECT start, "end", {text} FROM {NVTX_TABLE} WHERE "end" >= start ORDER BY start'
            ).fetchall()
    except sqlite3.Error as exc:
        raise ProfileError(path, f"corrupt or truncated SQLite file ({exc})") from exc
    pattern = re.compile(rf"{re.escape(name)}(?:\s*[#_: ]\s*(\d+))?")
    numbered: dict[int, Step] = {}
    plain: list[Step] = []
    for start, end, label in rows:
        found = pattern.fullmatch(str(label or "").strip())
        if found is None:
            continue
        if found.group(1) is None:
            plain.append(Step(len(plain), start, end, start, end))
        else:
            n = int(found.group(1))
            numbered.setdefault(n, Step(n, start, end, start, end))
    if numbered or plain:
        return dict(sorted(numbered.items())) if numbered else {s.number: s for s in plain}
    counts = Counter(str(label) for *_, label in rows)
    top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
    have = ", ".join(f"{n!r} x{c}" for n, c in top) + (", ..." if len(counts) > 5 else "")
    raise StepError(
        f"{path}: no NVTX range named {name!r} or {name}#N (--range NAME); its ranges:"
        f" {have or 'none'}"
    )


def chosen(path: str | os.PathLike[str], steps: dict[int, Step], choice: Choice) -> list[Step]:
    """The chosen steps of a file; StepError naming the first it lacks and the steps it has."""
    missing = [n for n in choice.numbers() if n not in steps]
    if missing:
        raise StepError(
            f"{path}: no step {missing[0]} among its {choice.name} ranges (its steps:"
            f" {spans(sorted(steps)) or 'none'})"
        )
    return [steps[n] for n in choice.numbers()]


def spans(numbers: Sequence[int]) -> str:
    """[1, 2, 3, 7] -> "1-3, 7"."""
    runs = [[n for _, n in g] for _, g in groupby(enumerate(numbers), lambda p: p[1] - p[0])]
    return ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """--step and --range, for the CLI's commands and diff."""
    parser.add_argument("--step", type=_step_type, metavar="N|A-B",
                        help="only these training steps (ProfilerStep#N in a Kineto trace, the"
                        " --range NVTX ranges in an nsys export): metrics, breakdown and diff"
                        " over them, and per step busy, idle and communication")  # fmt: skip
    parser.add_argument("--range", metavar="NAME",
                        help=f"the ranges that are steps: NAME#N (an NVTX range NAME alone is"
                        f" numbered in time order from 0); default {DEFAULT_RANGE}")  # fmt: skip


def _step_type(text: str) -> tuple[int, int]:
    try:
        return step_numbers(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def choice_of(args: argparse.Namespace, parser: argparse.ArgumentParser) -> Choice | None:
    """The steps the arguments choose (None: the whole profile); --range alone is refused."""
    if args.step is None:
        if args.range is not None:
            parser.error("--range names the ranges that --step counts; give --step too")
        return None
    name = args.range if args.range is not None else DEFAULT_RANGE
    if not name.strip():
        parser.error("--range must name a range")
    return Choice(*args.step, name.strip())


# --- reading a window ------------------------------------------------------------------------


def nsys_views(lo: int, hi: int) -> Callable[[sqlite3.Connection], None]:
    """A connection's set-up showing each CUDA table through a TEMP view of its name (SQLite
    resolves temp before main) of the records overlapping [lo, hi) ns, clipped to it, with every
    column and the rowid, so the readers read it as the table."""

    from .nsys_schema import SPAN_TABLES

    def setup(con: sqlite3.Connection) -> None:
        for table in SPAN_TABLES:
            cols = [r[1] for r in con.execute(f'PRAGMA main.table_info("{table}")')]
            if not {"start", "end"} <= set(cols):
                continue
            picked = ", ".join(
                f"MAX(start, {lo}) AS start" if c == "start"
                else f'MIN("end", {hi}) AS "end"' if c == "end" else f'"{c}"'
                for c in cols
            )  # fmt: skip
            inside = f'(start < {hi} AND "end" > {lo} OR start = "end" AND start >= {lo} AND start < {hi})'  # fmt: skip
            con.execute(
                f'CREATE TEMP VIEW "{table}" AS SELECT {picked}, rowid AS rowid'
                f' FROM main."{table}" WHERE {inside}'
            )

    return setup


def kineto_clip(
    lo: float, hi: float, host_hi: float | None = None
) -> Callable[[Iterator[list[Any]]], Iterator[list[Any]]]:
    """A read_torch_trace events transform: complete events overlapping [lo, hi) us (host
    records: [lo, host_hi) where given), clipped to it; other elements pass as they are."""
    gpu_hi = hi

    def clip(batches: Iterator[list[Any]]) -> Iterator[list[Any]]:
        for evs in batches:
            kept = []
            for ev in evs:
                ts = ev.get("ts") if isinstance(ev, dict) and ev.get("ph") == "X" else None
                if not isinstance(ts, int | float):
                    kept.append(ev)
                    continue
                gpu = host_hi is None or ev.get("cat") in GPU_WORK_CATS
                hi = gpu_hi if gpu else host_hi
                end = ts + (ev.get("dur") or 0)
                if not (ts < hi and end > lo or ts == end and lo <= ts < hi):
                    continue
                if ts < lo or end > hi:
                    start = max(ts, lo)
                    ev = {**ev, "ts": start, "dur": min(end, hi) - start}
                kept.append(ev)
            yield kept

    return clip


def read_window(
    path: str | os.PathLike[str], source: str, steps: Sequence[Step], label: str, cpu_ops: bool
) -> tuple[RankProfile, Breakdown]:
    """A file's metrics and breakdown clipped to the steps' window, its wall named by label."""
    lo, hi = steps[0].start_ns, max(s.end_ns for s in steps)
    if source == "nsys":
        prof, bd = read_nsys(path, setup=nsys_views(lo, hi))
    else:
        host_end = max(s.end if s.host_end is None else s.host_end for s in steps)
        end = max(s.end for s in steps)
        clip = kineto_clip(steps[0].start, end, host_end if host_end < end else None)
        prof, bd = read_torch(path, cpu_ops, events=clip)
    prof = dataclasses.replace(
        prof,
        wall_s=(hi - lo) / _NS_PER_S,
        wall_from=label,
        span_ns={**prof.span_ns, SPAN_WALL: (lo, hi)},
        outside={},  # every record is inside: it was clipped to the window
    )
    return prof, for_wall(bd, prof)


def read_steps(
    path: str | os.PathLike[str], source: str, choice: Choice, cpu_ops: bool = True
) -> tuple[RankProfile, Breakdown, list[tuple[Step, Breakdown]]]:
    """A file's profile and breakdown over the chosen steps, and each step's breakdown;
    StepError where it lacks one, ProfileError on unreadable input."""
    find = nvtx_steps if source == "nsys" else kineto_steps
    steps = chosen(path, find(path, choice.name), choice)
    prof, bd = read_window(path, source, steps, choice.label(), cpu_ops)
    if len(steps) == 1:
        return prof, bd, [(steps[0], bd)]
    each = [(s, read_window(path, source, [s], choice.label(s.number), cpu_ops)[1]) for s in steps]
    return prof, bd, each


def step_lines(rank: int, each: Sequence[tuple[Step, Breakdown]]) -> list[str]:
    """Per step: its window and, per device, busy, idle and communication (share of the step)."""
    lines = [f"per step, rank {rank}:"]
    for step, bd in each:
        win = bd.window_ns

        def part(ns: int, win: int = win) -> str:
            share = f" ({ns / win:.1%})" if win > 0 else ""
            return f"{ns / _NS_PER_S:.4g} s{share}"

        devices = "; ".join(
            f"device {dev} busy {part(t.busy)}, idle {part(win - t.busy)}, comm {part(t.comm)}"
            for dev, t in bd.devices.items()
        )
        lines.append(
            f"  step {step.number}: window {win / _NS_PER_S:.4g} s; {devices or 'no GPU activity'}"
        )
    return lines
