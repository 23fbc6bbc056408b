"""Where a rank's time went, by interval union: one definition for nsys exports and Kineto traces.

Per (rank, device), over a window:
    busy                 |union of kernels, copies and memsets on the device|
    idle                 window - busy
    compute              |union of non-NCCL kernels|
    comm                 |union of NCCL kernels| (metrics.nccl_metric decides what is NCCL)
    comm_not_overlapped  |union(comm) minus union(compute)|, as |comm u compute| - |compute|
and per rank, on the row whose device is HOST:
    host_blocked         |union of BLOCKING_CALLS| over every host thread of the rank
Unions, not sums: two streams running at once count once, so every quantity is 0..window.

Window: the wall the metrics chose for the rank's share column (`for_wall`), placed on the
clock; it holds every CUDA record of the file, else it is widened to the CUDA activity span.

Times are integer ns in both readers, so the two agree exactly on the same job: Kineto's float
microseconds become start = round(ts * 1000), end = start + round(dur * 1000) (intervals.us_to_ns:
epoch timestamps times 1000 are past a float's 2**53), so every duration equals nsys's.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable
from functools import partial
from pathlib import Path

from . import run_names
from .breakdown_kineto import KinetoIntervals
from .metrics import SPAN_ACTIVITY, SPAN_WALL, ProfileError, RankProfile, nccl_metric
from .torch_trace import SPAN_TRACE, read_torch_trace

QUANTITIES = ("window", "busy", "idle", "compute", "comm", "comm_not_overlapped", "host_blocked")
HOST = "host"  # the `device` of the per-rank host row
COLUMNS = ["run", "rank", "source", "device", "quantity", "seconds", "share_of_window"]
WINDOW_ACTIVITY = "CUDA activity span"
# Host calls that wait for the GPU: the host is blocked for their whole duration. Names after
# dropping nsys's _v7000 / _ptsz suffixes; driver calls beside their runtime equivalents.
BLOCKING_CALLS = frozenset(
    (
        "cudaDeviceSynchronize cudaStreamSynchronize cudaEventSynchronize cudaMemcpy cudaMemcpy2D"
        " cudaMemcpy3D cudaMemcpyFromSymbol cuCtxSynchronize cuStreamSynchronize"
        " cuEventSynchronize cuMemcpy cuMemcpyDtoH cuMemcpyHtoD cuMemcpyDtoD"
        # their HIP twins, as a ROCm build's Kineto trace names them
        " hipDeviceSynchronize hipStreamSynchronize hipEventSynchronize hipMemcpy hipMemcpy2D"
        " hipMemcpy3D hipMemcpyFromSymbol hipMemcpyWithStream hipMemcpyDtoH hipMemcpyHtoD"
        " hipMemcpyDtoD"
    ).split()
)
_SUFFIX = re.compile(r"(?:_v\d+)?(?:_ptsz|_ptds)?(?:_v\d+)?$")
_NS_PER_S = 1e9


def is_blocking(api: str) -> bool:
    """Whether a runtime or driver API name (nsys or Kineto spelling) is in BLOCKING_CALLS."""
    return _SUFFIX.sub("", api.strip()) in BLOCKING_CALLS


def _is_comm(name: str) -> bool:
    return nccl_metric(name) is not None


@dataclasses.dataclass(frozen=True)
class DeviceTimes:
    """One device's unions in nanoseconds (idle is derived)."""

    busy: int
    compute: int
    comm: int
    comm_not_overlapped: int


@dataclasses.dataclass(frozen=True)
class DeviceCounts:
    """The records one device's unions were made of: kernels, copies and memsets."""

    kernels: int
    copies: int
    memsets: int


@dataclasses.dataclass(frozen=True)
class Breakdown:
    """One rank's breakdown; window and activity (first record's start to last one's end,
    (0, 0) if none) are [lo, hi) in ns."""

    source: str
    window: tuple[int, int]
    window_from: str
    devices: dict[int, DeviceTimes]
    host_blocked: int
    activity: tuple[int, int] = (0, 0)
    counts: dict[int, DeviceCounts] = dataclasses.field(default_factory=dict)
    device_kind: str = "CUDA"

    @property
    def window_ns(self) -> int:
        return self.window[1] - self.window[0]


def breakdown_rows(run: str, rank: int, bd: Breakdown) -> list[tuple]:
    """The tidy rows (COLUMNS) of one rank's breakdown."""
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
    return records


def breakdown_lines(rank: int, bd: Breakdown) -> list[str]:
    win = bd.window_ns

    def fmt(ns: int) -> str:
        share = f"{ns / win:.1%}" if win > 0 else "n/a"
        return f"{ns / _NS_PER_S:.4g} s ({share})"

    act = (bd.activity[1] - bd.activity[0]) / _NS_PER_S
    kind = bd.device_kind or "CUDA"
    lines = [
        f"breakdown rank {rank} ({bd.source}): window {win / _NS_PER_S:.4g} s ({bd.window_from}),"
        f" {kind} activity {act:.4g} s"
    ]
    for dev, t in bd.devices.items():
        n = bd.counts.get(dev)
        made = ""
        if n is not None:
            made = f" ({_many(n.kernels, 'kernel')}, {_many(n.copies, 'copy', 'copies')},"
            made += f" {_many(n.memsets, 'memset')})"
        lines.append(f"  device {dev}{made}: busy {fmt(t.busy)}, idle {fmt(win - t.busy)}")
        lines.append(
            f"    compute {fmt(t.compute)}, comm {fmt(t.comm)},"
            f" comm not overlapped {fmt(t.comm_not_overlapped)}"
        )
    if not bd.devices:
        lines.append("  no GPU activity")
    lines.append(f"  host blocked in {kind.split('/')[0]} calls: {fmt(bd.host_blocked)}")
    return lines


def _many(n: int, one: str, more: str = "") -> str:
    return f"{n} {one if n == 1 else more or one + 's'}"


def breakdown_path(metrics_csv: str | os.PathLike[str]) -> Path:
    """The breakdown CSV beside a metrics CSV: profile_metrics.csv -> profile_breakdown.csv,
    metrics.csv -> metrics.breakdown.csv."""
    out = Path(metrics_csv)
    names = run_names.profiling()
    if names is not None and out.name == names.PROFILE_METRICS:  # a run folder's: run/'s name
        return out.with_name(names.PROFILE_BREAKDOWN)
    if out.stem.endswith("_metrics"):
        return out.with_name(out.stem.removesuffix("_metrics") + "_breakdown" + out.suffix)
    return out.with_name(f"{out.stem}.breakdown{out.suffix or '.csv'}")


def for_wall(bd: Breakdown, profile: RankProfile) -> Breakdown:
    """The breakdown over the wall the profile's share column divides by: span_ns[SPAN_WALL]
    (nsys_sqlite.with_capture), else the span wall_from names ("<span> (<why>)") widened to the
    activity span, else the activity span. Call it again after with_capture re-chose the wall."""
    placed = profile.span_ns.get(SPAN_WALL)
    if placed is not None:
        return dataclasses.replace(bd, window=placed, window_from=profile.wall_from)
    name = next((n for n in profile.span_ns if profile.wall_from.startswith(n)), None)
    act_lo, act_hi = bd.activity
    if name is None:
        return dataclasses.replace(bd, window=bd.activity, window_from=WINDOW_ACTIVITY)
    lo, hi = profile.span_ns[name]
    why = profile.wall_from or name
    if act_hi > act_lo and (lo > act_lo or hi < act_hi):
        lo, hi = min(lo, act_lo), max(hi, act_hi)
        why += f", widened to the {WINDOW_ACTIVITY}"
    return dataclasses.replace(bd, window=(lo, hi), window_from=why)


def read_nsys(
    path: str | os.PathLike[str], capture: str | None = None, setup: Callable | None = None
) -> tuple[RankProfile, Breakdown]:
    """The metrics and the breakdown of an export, in one pass (setup: read_nsys_with's)."""
    from .breakdown_nsys import nsys_gpu, nsys_host  # the nsys reader, where one is read
    from .nsys_sqlite import read_nsys_with

    counted: dict[str, dict] = {}  # the call, kernel and copy metrics, counted by the scans
    jobs = (
        partial(nsys_gpu, is_comm=_is_comm, counted=counted),
        partial(nsys_host, is_blocking=is_blocking, counted=counted),
    )
    prof, (unions, blocked) = read_nsys_with(path, jobs, capture, counted.get, setup)
    activity = prof.span_ns.get(SPAN_ACTIVITY, (0, 0))
    bd = _breakdown("nsys", unions, blocked, activity, prof.device_kind)
    return prof, for_wall(bd, prof)


def _breakdown(
    source: str,
    unions: dict[int, tuple[int, ...]],
    blocked: int,
    activity: tuple[int, int],
    kind: str,
) -> Breakdown:
    """A Breakdown over the activity span (for_wall places it) from intervals.gpu_unions' tuples."""
    devices = {dev: DeviceTimes(b, c, m, k - c) for dev, (b, c, m, k, *_) in unions.items()}
    counts = {dev: DeviceCounts(*u[4:7]) for dev, u in unions.items() if len(u) >= 7}
    return Breakdown(source, activity, WINDOW_ACTIVITY, devices, blocked, activity, counts,
                     kind or "CUDA")  # fmt: skip


def read_torch(
    path: str | os.PathLike[str], cpu_ops: bool = True, events: Callable | None = None
) -> tuple[RankProfile, Breakdown]:
    """The metrics and the breakdown of a trace, in one pass (two where its events are out of
    time order beyond the fold's window); events: read_torch_trace's."""
    made: list[KinetoIntervals] = []

    def feed_for(keep_all: bool) -> KinetoIntervals:
        made.append(KinetoIntervals(is_blocking, _is_comm, keep_all))
        return made[-1]

    try:
        prof = read_torch_trace(path, cpu_ops, feed_for, events)
    except OverflowError as exc:  # an infinite or huge ts/dur in an event
        raise ProfileError(path, f"malformed trace event ({exc!r})") from None
    unions, blocked, activity = made[-1].result()
    bd = for_wall(_breakdown("torch", unions, blocked, activity or (0, 0), prof.device_kind), prof)
    # The trace span ends at the latest float ts + dur, the activity at the latest start + dur each
    # rounded to ns (module docstring): up to 1 ns later. The wall is that window, so that the shares and
    # the breakdown divide by one length.
    if bd.window != prof.span_ns.get(SPAN_TRACE):
        places = {**prof.span_ns, SPAN_WALL: bd.window}
        prof = dataclasses.replace(prof, wall_s=bd.window_ns / _NS_PER_S, span_ns=places)
        bd = dataclasses.replace(bd, window_from=prof.wall_from)
    return prof, bd
