"""Where a rank's time went, by interval union: one definition for nsys exports and Kineto traces.

Per (rank, device), over a window (the rank's CUDA activity span unless a caller gives another):
    busy                 |union of kernels, copies and memsets on the device|
    idle                 window - busy
    compute              |union of non-NCCL kernels|
    comm                 |union of NCCL kernels| (metrics.nccl_metric decides what is NCCL)
    comm_not_overlapped  |union(comm) minus union(compute)|, as |comm u compute| - |compute|
and per rank, on the row whose device is HOST:
    host_blocked         |union of BLOCKING_CALLS| over every host thread of the rank
Unions, not sums: two streams running at once count once, so every quantity is 0..window.

Bounded memory: the union is streamed. Intervals arrive sorted by start (each device's own
subsequence sorted; devices may interleave) and are merged on the fly, so only one open interval
per quantity is held. The nsys reader has SQLite sort (ORDER BY start, on disk for large tables)
and merges the kernel, copy and memset streams with heapq.merge. A Kineto trace is not sorted, so
its GPU intervals are kept as int64 arrays (24 bytes an interval) and sorted one device at a time:
memory is bounded by the GPU events of the trace, in practice those of one device per rank.

Times are integer nanoseconds in both readers, so the two agree exactly on the same job. Kineto
writes microseconds as floats (three decimals): start = round(ts * 1000) and
end = start + round(dur * 1000), each rounded to the nearest nanosecond, which keeps every duration
equal to the one nsys records for the same call.
"""

from __future__ import annotations

import dataclasses
import heapq
import os
import re
import sqlite3
from array import array
from collections.abc import Iterable, Iterator
from pathlib import Path

import pandas as pd

from run.node import profiling

from .metrics import ProfileError, nccl_metric

# The export's schema helpers are shared so both nsys readers see one schema the same way.
from .nsys_sqlite import (
    _KERNEL_NAME_COLUMNS,
    KERNEL,
    MEMCPY,
    RUNTIME,
    SPAN_TABLES,
    _schema,
    _strings,
    runtime_calls,
)
from .nsys_sqlite import MEMSET as MEMSET_TABLE
from .torch_trace import iter_trace_events

COMPUTE, COMM, COPY, MEMSET = "compute", "comm", "copy", "memset"
QUANTITIES = ("window", "busy", "idle", "compute", "comm", "comm_not_overlapped", "host_blocked")
HOST = "host"  # the `device` of the per-rank host row
COLUMNS = ["run", "rank", "source", "device", "quantity", "seconds", "share_of_window"]
WINDOW_ACTIVITY = "CUDA activity span"
# Host calls that wait for the GPU: the host is blocked for their whole duration. Names after
# dropping nsys's _v7000 / _ptsz suffixes; driver calls beside their runtime equivalents.
BLOCKING_CALLS = frozenset(
    {
        "cudaDeviceSynchronize",
        "cudaStreamSynchronize",
        "cudaEventSynchronize",
        "cudaMemcpy",
        "cudaMemcpy2D",
        "cudaMemcpy3D",
        "cudaMemcpyFromSymbol",
        "cuCtxSynchronize",
        "cuStreamSynchronize",
        "cuEventSynchronize",
        "cuMemcpy",
        "cuMemcpyDtoH",
        "cuMemcpyHtoD",
        "cuMemcpyDtoD",
    }
)
_SUFFIX = re.compile(r"(?:_v\d+)?(?:_ptsz|_ptds)?(?:_v\d+)?$")
_NS_PER_S = 1e9
_KINETO_GPU = {"kernel": None, "gpu_memcpy": COPY, "gpu_memset": MEMSET}
_KINETO_HOST = ("cuda_runtime", "cuda_driver")


def is_blocking(api: str) -> bool:
    """Whether a runtime or driver API name (nsys or Kineto spelling) is in BLOCKING_CALLS."""
    return _SUFFIX.sub("", api.strip()) in BLOCKING_CALLS


def kernel_kind(name: str) -> str:
    """COMM for an NCCL kernel, COMPUTE for any other."""
    return COMM if nccl_metric(name) else COMPUTE


class _Union:
    """Length of the union of intervals fed in order of start, holding one open interval."""

    __slots__ = ("hi", "last", "lo", "total")

    def __init__(self) -> None:
        self.total, self.lo, self.hi, self.last = 0, 0, 0, None

    def add(self, start: int, end: int) -> None:
        if self.last is not None and start < self.last:
            raise ValueError(f"intervals not sorted by start ({start} after {self.last})")
        self.last = start
        if end <= start:
            return  # empty, or a record ending before it starts: no time to count
        if start > self.hi or self.lo == self.hi:
            self.total += self.hi - self.lo
            self.lo, self.hi = start, end
        elif end > self.hi:
            self.hi = end

    def length(self) -> int:
        return self.total + self.hi - self.lo


def merge_sorted(intervals: Iterable[tuple[int, int]]) -> Iterator[tuple[int, int]]:
    """Merge (start, end) intervals sorted by start into disjoint ones, streamed.

    Touching intervals merge; empty ones vanish. Raises ValueError on input out of order.
    """
    lo = hi = last = None
    for start, end in intervals:
        if last is not None and start < last:
            raise ValueError(f"intervals not sorted by start ({start} after {last})")
        last = start
        if end <= start:
            continue
        if hi is None or start > hi:
            if hi is not None:
                yield lo, hi
            lo, hi = start, end
        elif end > hi:
            hi = end
    if hi is not None:
        yield lo, hi


def union_ns(intervals: Iterable[tuple[int, int]]) -> int:
    """Length of the union of (start, end) intervals sorted by start, in bounded memory."""
    acc = _Union()
    for start, end in intervals:
        acc.add(start, end)
    return acc.length()


@dataclasses.dataclass(frozen=True)
class DeviceTimes:
    """One device's unions in nanoseconds (idle is derived)."""

    busy: int
    compute: int
    comm: int
    comm_not_overlapped: int


@dataclasses.dataclass(frozen=True)
class Breakdown:
    """One rank's breakdown: window [lo, hi) in ns, per-device unions, host time blocked."""

    source: str
    window: tuple[int, int]
    window_from: str
    devices: dict[int, DeviceTimes]
    host_blocked: int

    @property
    def window_ns(self) -> int:
        return self.window[1] - self.window[0]


def compute(
    gpu: Iterable[tuple[int, int, int, str]],
    host: Iterable[tuple[int, int]],
    window: tuple[int, int],
    source: str = "",
    window_from: str = WINDOW_ACTIVITY,
) -> Breakdown:
    """Breakdown of (start, end, device, kind) GPU intervals and (start, end) blocking host calls.

    Each device's intervals, and the host calls, must come sorted by start; everything is clipped
    to `window` (clipping keeps that order). Raises ValueError on input out of order.
    """
    lo, hi = window
    unions: dict[int, tuple[_Union, _Union, _Union, _Union]] = {}
    for start, end, device, kind in gpu:
        start, end = max(start, lo), min(end, hi)
        acc = unions.get(device)
        if acc is None:
            acc = unions[device] = (_Union(), _Union(), _Union(), _Union())
        busy, comp, comm, kernels = acc
        busy.add(start, end)
        if kind == COMPUTE:
            comp.add(start, end)
            kernels.add(start, end)
        elif kind == COMM:
            comm.add(start, end)
            kernels.add(start, end)
    devices = {
        dev: DeviceTimes(b.length(), c.length(), m.length(), k.length() - c.length())
        for dev, (b, c, m, k) in sorted(unions.items())
    }
    blocked = union_ns((max(s, lo), min(e, hi)) for s, e in host)
    return Breakdown(source, window, window_from, devices, blocked)


def breakdown_frame(run: str, rank: int, bd: Breakdown) -> pd.DataFrame:
    """The tidy rows (COLUMNS) of one rank's breakdown: one per device and quantity, plus HOST."""
    win = bd.window_ns
    records = []

    def add(device: str, quantity: str, ns: int) -> None:
        share = ns / win if win > 0 else float("nan")
        records.append((run, rank, bd.source, device, quantity, ns / _NS_PER_S, share))

    for dev, t in bd.devices.items():
        values = (win, t.busy, win - t.busy, t.compute, t.comm, t.comm_not_overlapped)
        for quantity, ns in zip(QUANTITIES, values, strict=False):
            add(str(dev), quantity, ns)
    add(HOST, "window", win)
    add(HOST, "host_blocked", bd.host_blocked)
    return pd.DataFrame.from_records(records, columns=COLUMNS)


def breakdown_lines(rank: int, bd: Breakdown) -> list[str]:
    """A few summary lines for one rank: the window, each device, the host."""
    win = bd.window_ns

    def fmt(ns: int) -> str:
        share = f"{ns / win:.1%}" if win > 0 else "n/a"
        return f"{ns / _NS_PER_S:.4g} s ({share})"

    lines = [
        f"breakdown rank {rank} ({bd.source}): window {win / _NS_PER_S:.4g} s ({bd.window_from})"
    ]
    for dev, t in bd.devices.items():
        lines.append(f"  device {dev}: busy {fmt(t.busy)}, idle {fmt(win - t.busy)}")
        lines.append(
            f"    compute {fmt(t.compute)}, comm {fmt(t.comm)},"
            f" comm not overlapped {fmt(t.comm_not_overlapped)}"
        )
    if not bd.devices:
        lines.append("  no GPU activity")
    lines.append(f"  host blocked in CUDA calls: {fmt(bd.host_blocked)}")
    return lines


def breakdown_path(metrics_csv: str | os.PathLike[str]) -> Path:
    """The breakdown CSV beside a metrics CSV: profile_metrics.csv -> profile_breakdown.csv,
    metrics.csv -> metrics.breakdown.csv."""
    out = Path(metrics_csv)
    if out.name == profiling.PROFILE_METRICS:  # a run folder's: the name run/ declares
        return out.with_name(profiling.PROFILE_BREAKDOWN)
    if out.stem.endswith("_metrics"):
        return out.with_name(out.stem.removesuffix("_metrics") + "_breakdown" + out.suffix)
    return out.with_name(f"{out.stem}.breakdown{out.suffix or '.csv'}")


def read_breakdown(path: str | os.PathLike[str], source: str) -> Breakdown:
    """The breakdown of one profile file ("nsys" or "torch"); ProfileError on bad input."""
    if source == "nsys":
        return nsys_breakdown(path)
    return torch_breakdown(path)


# --- nsys -----------------------------------------------------------------------------------


def nsys_breakdown(path: str | os.PathLike[str]) -> Breakdown:
    """Breakdown of an nsys SQLite export over its CUDA activity span (all intervals in SQL order)."""
    path = Path(path)
    try:
        con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise ProfileError(path, f"cannot open SQLite file ({exc})") from exc
    try:
        columns = _schema(con)
        spans = [
            con.execute(f'SELECT MIN(start), MAX("end") FROM {t}').fetchone()
            for t in SPAN_TABLES
            if {"start", "end"} <= columns.get(t, set())
        ]
        spans = [(a, b) for a, b in spans if a is not None and b is not None]
        window = (min(a for a, _ in spans), max(b for _, b in spans)) if spans else (0, 0)
        return compute(_nsys_gpu(con, columns), _nsys_host(con, columns), window, "nsys")
    except sqlite3.Error as exc:
        raise ProfileError(path, f"corrupt or truncated SQLite file ({exc})") from exc
    finally:
        con.close()


def _device(cols: set[str]) -> str:
    # A NULL or missing deviceId (hand-made files) becomes -1: not guessed to be device 0.
    return "COALESCE(deviceId, -1)" if "deviceId" in cols else "-1"


def _nsys_gpu(
    con: sqlite3.Connection, columns: dict[str, set[str]]
) -> Iterator[tuple[int, int, int, str]]:
    streams = []
    kcols = columns.get(KERNEL, set())
    name_col = next((c for c in _KERNEL_NAME_COLUMNS if c in kcols), None)
    if {"start", "end"} <= kcols and name_col:
        ids = [i for (i,) in con.execute(f"SELECT DISTINCT {name_col} FROM {KERNEL}")]
        comm = {i for i, name in _strings(con, ids).items() if kernel_kind(name) == COMM}
        rows = con.execute(
            f'SELECT start, "end", {_device(kcols)}, {name_col} FROM {KERNEL} ORDER BY start'
        )
        streams.append((s, e, d, COMM if n in comm else COMPUTE) for s, e, d, n in rows)
    for table, kind in ((MEMCPY, COPY), (MEMSET_TABLE, MEMSET)):
        cols = columns.get(table, set())
        if {"start", "end"} <= cols:
            rows = con.execute(f'SELECT start, "end", {_device(cols)} FROM {table} ORDER BY start')
            streams.append((s, e, d, kind) for s, e, d in rows)
    return heapq.merge(*streams, key=lambda r: r[0])


def _nsys_host(con: sqlite3.Connection, columns: dict[str, set[str]]) -> Iterator[tuple[int, int]]:
    if not {"start", "end", "nameId"} <= columns.get(RUNTIME, set()):
        return iter(())
    ids = [i for (i,) in con.execute(f"SELECT DISTINCT nameId FROM {RUNTIME}")]
    keep = sorted(i for i, name in _strings(con, ids).items() if is_blocking(name))
    if not keep:
        return iter(())
    source = runtime_calls(con, columns)  # one row per call: backtrace rows left out
    sql = (
        f'SELECT start, "end" FROM {source} WHERE nameId IN ({",".join(map(str, keep))}) '
        "ORDER BY start"
    )
    return iter(con.execute(sql))


# --- Kineto ---------------------------------------------------------------------------------


def kineto_ns(ts: float, dur: float) -> tuple[int, int]:
    """(start, end) in integer ns from Kineto's float microseconds (module docstring)."""
    start = round(ts * 1000)
    return start, start + round(dur * 1000)


def torch_breakdown(path: str | os.PathLike[str]) -> Breakdown:
    """Breakdown of a Kineto trace over its CUDA activity span (runtime, driver and GPU events)."""
    path = Path(path)
    kinds = (COMPUTE, COMM, COPY, MEMSET)
    per_device: dict[int, tuple[array, array, array]] = {}
    host_s, host_e = array("q"), array("q")
    lo, hi = None, None
    try:
        for ev in iter_trace_events(path):
            cat = ev.get("cat")
            if cat not in _KINETO_GPU and cat not in _KINETO_HOST:
                continue
            if ev.get("ph") != "X" or ev.get("ts") is None:
                continue  # the metrics reader skips these too
            start, end = kineto_ns(ev["ts"], ev.get("dur") or 0)
            lo = start if lo is None or start < lo else lo
            hi = end if hi is None or end > hi else hi
            if cat in _KINETO_HOST:
                if is_blocking(str(ev.get("name", ""))):
                    host_s.append(start)
                    host_e.append(end)
                continue
            kind = _KINETO_GPU[cat] or kernel_kind(str(ev.get("name", "")))
            args = ev.get("args") or {}
            device = int(args.get("device", ev.get("pid", -1)))
            arrays = per_device.setdefault(device, (array("q"), array("q"), array("b")))
            arrays[0].append(start)
            arrays[1].append(end)
            arrays[2].append(kinds.index(kind))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ProfileError(path, f"malformed trace event ({exc!r})") from None

    def gpu() -> Iterator[tuple[int, int, int, str]]:
        for device in sorted(per_device):
            starts, ends, codes = per_device.pop(device)
            for i in sorted(range(len(starts)), key=starts.__getitem__):
                yield starts[i], ends[i], device, kinds[codes[i]]

    host = ((host_s[i], host_e[i]) for i in sorted(range(len(host_s)), key=host_s.__getitem__))
    window = (lo, hi) if lo is not None else (0, 0)
    return compute(gpu(), host, window, "torch")
