"""Read a torch.profiler / Kineto Chrome trace (*.pt.trace.json[.gz]) into aggregated metric rows.

The trace is parsed incrementally, a chunk read and a batch of "traceEvents" elements decoded at
a time (json; msgspec from the second batch on, kineto_fast): memory is one chunk plus one row
per distinct event name, whatever the file size (multi-GB traces are common). The generations
read (torch 1.8's bare array and capitalised categories to 2.x, ROCm, CPU-only): README's
version table; the `cpu:<op>` rows and device_kind: README, "How the nsys reader counts".
"""

from __future__ import annotations

import contextlib
import gc
import gzip
import json
import os
import re
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TextIO

from . import kineto_fast
from .breakdown_kineto import CpuUnions, KinetoIntervals
from .intervals import us_ns
from .kineto_fold import HIP, KINDS, Folded, device_kind, fold, hip_metric, unknown_gpu
from .kineto_gzip import GzipText
from .metrics import (
    CPU_PREFIX,
    ProfileError,
    RankProfile,
    Row,
    memcpy_metric,
    nccl_metric,
    newer_version_note,
    runtime_metric,
)

GZIP_MAGIC = b"\x1f\x8b"
_CHUNK_CHARS = 1 << 18  # per read: 1 << 20 was no faster, and a long trace's heap grew
_MAX_PENDING = 16 << 20  # one JSON element larger than this is treated as corrupt input
_BATCH_CHARS = 1 << 16  # text decoded by one C call (a Python step per element: +25%)
_WS = re.compile(r"[ \t\n\r]*")
_SEP = re.compile(r"[ \t\n\r]*([,\]])[ \t\n\r]*")
_STEP = re.compile(r"^(ProfilerStep)#\d+$")  # one name per step otherwise
_US_PER_S = 1e6
_NS_PER_S = 1e9
# Kineto "schemaVersion" values the golden traces carry (README); a newer one gets one warning.
KINETO_COVERED = ("1",)
# The wall time of a trace: from its first complete event's start to its last one's end.
SPAN_TRACE = "trace span"
_NO_EVENTS = "JSON without a traceEvents array (not a Chrome trace)"


def read_torch_trace(
    path: str | os.PathLike[str],
    cpu_ops: bool = True,
    feed_for: Callable[[bool], KinetoIntervals] | None = None,
    events: Callable[[Iterator[list[Any]]], Iterator[list[Any]]] | None = None,
) -> RankProfile:
    """Aggregate one Chrome trace; `cpu_ops` adds "cpu:<op>" rows. ProfileError naming the file
    for a missing, truncated or non-trace file, or one of GPU events of no known category.

    feed_for(keep_all): the feed given every complete event of its cats in the same pass (the
    time breakdown). Where the events come out of time order beyond what the feed or the CPU
    unions fold, the trace is read again, keeping every interval. events: a transform of the
    decoded batches (steps.py clips them to a window).
    """
    path = Path(path)
    for keep_all in (False, True):
        feed = feed_for(keep_all) if feed_for is not None else None
        cpu = CpuUnions(op_name, keep_all) if cpu_ops else None
        with _reading(path) as fh:
            prof = _aggregate(path, _JsonStream(fh, path), cpu_ops, feed, cpu, events)
        if prof is not None:
            return prof
    raise AssertionError("a keep_all reading is never out of order")


def op_name(raw: str) -> str:
    """A CPU op's row name: ProfilerStep#1, #2 ... are one op, ProfilerStep."""
    return _STEP.sub(r"\1", raw)


@contextlib.contextmanager
def _reading(path: Path) -> Iterator[TextIO | GzipText]:
    """The trace's text; every way a file fails to read is one ProfileError naming it."""
    try:
        with open(path, "rb") as fh:
            gz = fh.read(2) == GZIP_MAGIC
        with GzipText(path) if gz else open(path, encoding="utf-8") as fh:
            yield fh
    except FileNotFoundError as exc:
        raise ProfileError(path, "file not found") from exc
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise ProfileError(path, f"truncated or corrupt gzip stream ({exc})") from exc
    except UnicodeDecodeError as exc:
        raise ProfileError(path, f"not UTF-8 text at byte {exc.start}; not a JSON trace") from exc
    except OSError as exc:
        raise ProfileError(path, f"cannot read file ({exc.strerror or exc})") from exc


class _JsonStream:
    """Minimal pull parser: enough JSON structure to walk {"...": ..., "traceEvents": [...]}."""

    def __init__(self, fh: TextIO | GzipText, path: Path) -> None:
        self.fh, self.path = fh, path
        self.buf, self.pos, self.consumed, self.eof = "", 0, 0, False
        self.decoder = json.JSONDecoder()
        self.batch_from = 0  # no batch before this buffer index (a cut there failed)
        # Whether kineto_fast may decode batches (from the second on: a small trace is read
        # without importing it); not where json's dicts are read.
        self.fast = False
        self.batches = 0

    def _fill(self) -> bool:
        if self.eof:
            return False
        data = self.fh.read(_CHUNK_CHARS)
        if not data:
            self.eof = True
            return False
        # Drop what was parsed so the buffer stays about one chunk long.
        self.consumed += self.pos
        self.batch_from = max(0, self.batch_from - self.pos)
        self.buf = self.buf[self.pos :] + data
        self.pos = 0
        return True

    def _fail(self, problem: str) -> ProfileError:
        return ProfileError(self.path, f"{problem} at character {self.consumed + self.pos}")

    def next_char(self) -> str:
        """Consume and return the next non-whitespace character ('' at end of file)."""
        while True:
            self.pos = _WS.match(self.buf, self.pos).end()
            if self.pos < len(self.buf):
                ch = self.buf[self.pos]
                self.pos += 1
                return ch
            if not self._fill():
                return ""

    def peek_char(self) -> str:
        ch = self.next_char()
        if ch:
            self.pos -= 1
        return ch

    def value(self) -> Any:
        """Decode one JSON value, reading more input while it is incomplete."""
        self.peek_char()
        while True:
            try:
                obj, end = self.decoder.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                if len(self.buf) - self.pos > _MAX_PENDING or not self._fill():
                    raise self._fail(f"{self._why(exc)} JSON ({exc.msg})") from None
                continue
            # A number that ends exactly at the buffer end may continue in the next chunk.
            if end == len(self.buf) and not self.eof and self._fill():
                continue
            self.pos = end
            return obj

    def _why(self, exc: json.JSONDecodeError) -> str:
        """ "truncated" where the input just stops at EOF, "invalid" where bad text follows."""
        cut = exc.msg.startswith("Unterminated string") or exc.pos >= len(self.buf.rstrip())
        return "truncated" if self.eof and cut else "invalid"

    def _batch(self) -> list[Any] | None:
        """Decode the complete elements ahead in one call, leaving pos at the next one; None where
        no cut is found or the batch does not decode (the per-element path then reports any
        error at its place). A batch's worth of text is kept ahead, so a cut is found at a
        chunk's end too (the per-element path cost two decode errors per chunk there).

        A cut is a '}' followed by ',' and '{'. One inside a string or a nested value leaves the
        text before it unbalanced or a string open, so it never decodes: whatever decodes ends
        on an element boundary."""
        _ = len(self.buf) - self.pos < _BATCH_CHARS and self._fill()
        buf, pos = self.buf, self.pos
        if pos < self.batch_from:
            return None
        cut = buf.rfind("}", pos, min(len(buf), pos + _BATCH_CHARS))
        while cut > pos:
            m = _SEP.match(buf, cut + 1)
            if m is not None and m.group(1) == "," and buf.startswith("{", m.end()):
                break
            cut = buf.rfind("}", pos, cut)
        else:
            return None
        text = "".join(("[", buf[pos : cut + 1], "]"))
        # The cyclic collector would walk the whole batch several times while it is built
        # (a fifth of the read time); decoded JSON holds no cycles, so it is paused meanwhile.
        collect = gc.isenabled()
        gc.disable()
        try:
            self.batches += 1
            decode = kineto_fast.decoder() if self.fast and self.batches > 1 else None
            events = decode(text) if decode is not None else None
            # where msgspec refuses it, json decodes it: the same values, or its error
            objs = (
                self.decoder.raw_decode(text)[0] if events is None else kineto_fast.records(events)
            )
        except json.JSONDecodeError:
            self.batch_from = cut + 1
            return None
        finally:
            if collect:
                gc.enable()
        self.pos = m.end()
        return objs

    def events(self) -> Iterator[list[Any]]:
        """Yield the elements of the array whose '[' was just consumed, in lists (a batch, or one
        element): a generator step per element would cost more than the loop over them."""
        if self.peek_char() == "]":
            self.next_char()
            return
        while True:
            batch = self._batch()
            if batch is not None:
                yield batch
                continue
            # One element: where no batch is cut (the last one, one longer than _BATCH_CHARS),
            # or one does not decode (its error is then found at its place).
            obj = self.value()
            ch = self.next_char()
            if ch not in (",", "]"):
                raise self._fail("truncated JSON" if not ch else f"invalid JSON (found {ch!r})")
            yield [obj]
            if ch == "]":
                return
            self.peek_char()


def _walk(stream: _JsonStream, meta: dict[str, Any]) -> Iterator[list[Any]]:
    """Events of a {"traceEvents": [...]} object or of a bare Chrome-trace array, in lists;
    ProfileError at the end where there is no traceEvents array."""
    first = stream.next_char()
    if first == "[":
        yield from stream.events()
        return
    if first != "{":
        raise stream._fail("not a JSON Chrome trace (expected '{' or '[')")
    found = False
    while (ch := stream.next_char()) != "}":
        if ch != '"':
            raise stream._fail("truncated JSON" if not ch else "invalid JSON object")
        stream.pos -= 1
        key = stream.value()
        if stream.next_char() != ":":
            raise stream._fail("invalid JSON (expected ':')")
        if key == "traceEvents":
            if stream.next_char() != "[":
                raise stream._fail("traceEvents is not an array")
            found = True
            yield from stream.events()
        else:
            meta[key] = stream.value()  # small metadata such as distributedInfo
        ch = stream.next_char()
        if ch == "}":
            break
        if ch != ",":
            raise stream._fail("truncated JSON" if not ch else "invalid JSON object")
    if not found:
        raise ProfileError(stream.path, _NO_EVENTS)


def _aggregate(
    path: Path,
    stream: _JsonStream,
    cpu_ops: bool,
    feed: KinetoIntervals | None,
    cpu: CpuUnions | None,
    events: Callable[[Iterator[list[Any]]], Iterator[list[Any]]] | None = None,
) -> RankProfile | None:
    """The profile of one reading; None where the feed or the CPU unions found the events out of
    time order (read again with keep_all)."""
    meta: dict[str, Any] = {}
    found = Folded()
    stream.fast = events is None  # the steps' clipping reads json's dicts
    try:
        batches = _walk(stream, meta)
        fold(events(batches) if events else batches, cpu_ops, feed, found, cpu)
    except UnicodeDecodeError:
        raise  # a ValueError too, but read_torch_trace names it: binary, not a malformed event
    except (TypeError, ValueError, AttributeError) as exc:
        # e.g. "ts": "abc" or "args": [] -- a JSON file, but not a Chrome trace we can trust
        raise stream._fail(f"malformed trace event ({exc})") from None
    unknown = unknown_gpu(path, found.cats)
    try:  # the CPU ops first: where they need numpy, the feed's unions use it too (fold_small)
        op_time = cpu.result() if cpu is not None else {}
    except ValueError:
        return None
    if feed is not None:
        feed.spans(*found.fed)
        if not feed.finish():
            return None
    acc = {k: v for k, v in found.acc.items() if k[0] in KINDS}  # the metrics' keys only
    kind = device_kind(meta, acc, found.cats)
    lo, hi = found.lo, found.hi
    note = newer_version_note("Kineto schema", meta.get("schemaVersion"), KINETO_COVERED)
    info = meta.get("distributedInfo")
    rank = info.get("rank") if isinstance(info, dict) else None
    rank = rank if isinstance(rank, int) else None
    # In ns as the breakdown rounds Kineto's microseconds (breakdown.py's docstring).
    place = {SPAN_TRACE: (us_ns(lo), us_ns(hi))} if hi >= lo else {}
    wall_s = (place[SPAN_TRACE][1] - place[SPAN_TRACE][0]) / _NS_PER_S if place else 0.0
    return RankProfile(
        str(path), "torch", wall_s, SPAN_TRACE, _rows(acc, op_time, kind), rank,
        version_note="; ".join(n for n in (note, unknown) if n), span_ns=place, device_kind=kind,
    )  # fmt: skip


def _rows(acc: dict[tuple[str, str], list], op_time: dict[str, int], kind: str) -> list[Row]:
    merged: dict[tuple[str, str], Row] = {}
    for (what, raw), (calls, total_us, nbytes, *_) in acc.items():
        if what == "runtime":
            metric = hip_metric(raw) if kind == HIP else runtime_metric(raw)
        elif what == "kernel":
            metric = nccl_metric(raw)
        elif what == "memcpy":
            metric = memcpy_metric(raw)
        else:
            raw = op_name(raw)
            metric = CPU_PREFIX + raw
        if metric is None:
            continue
        # ProfilerStep#1, #2 ... collapse into one row
        row = merged.setdefault(
            (metric, raw), Row(metric, raw, 0, 0.0, nbytes if what == "memcpy" else None)
        )
        row.calls += calls
        row.total_s += total_us / _US_PER_S
    for (metric, raw), row in merged.items():
        if metric.startswith(CPU_PREFIX) and raw in op_time:
            row.total_s = op_time[raw] / _NS_PER_S  # the union, not the sum (module docstring)
    return list(merged.values())


def iter_trace_events(path: str | os.PathLike[str]) -> Iterator[Any]:
    """Every element of a trace's traceEvents, streamed; ProfileError as read_torch_trace."""
    path = Path(path)
    with _reading(path) as fh:
        for evs in _walk(_JsonStream(fh, path), {}):
            yield from evs
