"""The per-event loop of the Kineto reader (torch_trace._aggregate): complete ("X") events counted
by (kind, name), their span, and the CUDA ones handed to a Feed (the time breakdown's); at the
end, what the categories found say of the device (CUDA, HIP/ROCm, none, unknown).

Events come as the lists torch_trace's stream decodes in one call: json's dicts, or the records
of msgspec's structs (kineto_fast), read through one (ts, dur, cat, name, source) loop, the
source asked for its args only where they are read. Each category is looked up
once per event (its kind, whether the feed takes it, whether it is a host call), each name once
in its category's table, and a fed name's arrays are appended to through bound methods kept per
device. The cyclic collector is paused for the loop: decoded JSON holds no cycles, and it would
otherwise walk every batch of events once more after it is decoded.
"""

from __future__ import annotations

import gc
from array import array
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Protocol

from . import kineto_fast
from .kineto_fast import Records, as_dict
from .metrics import ProfileError

# Aggregation keys: (kind, raw name). kind selects the metric mapping applied at the end. The
# capitalised categories are those of torch 1.8-1.10 (libkineto before its late-2021 renames):
# Runtime, Kernel, Memcpy, Memset and, for CPU ops, Operator.
KIND_BY_CAT = {
    "cuda_runtime": "runtime",
    "cuda_driver": "runtime",
    "Runtime": "runtime",
    "kernel": "kernel",
    "Kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "Memcpy": "memcpy",
    "cpu_op": "cpu",
    "Operator": "cpu",
    "user_annotation": "cpu",
}
KINDS = frozenset(KIND_BY_CAT.values())
HOST_CATS = frozenset({"cuda_runtime", "cuda_driver", "Runtime"})
# GPU work the readers know (the kernels and copies above, and memsets): a trace with none of it
# but with GPU events of another category is one this reader cannot read (torch_trace).
GPU_WORK_CATS = frozenset({"kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset"})
# Categories known not to be GPU work, whatever their args say (cuda_sync: a wait on an event).
OTHER_CATS = frozenset(
    {"python_function", "Trace", "overhead", "cuda_sync", "cuda_profiler_range",
     "cpu_instant_event", "gpu_user_annotation", "gpu_user_Annotation", "external_correlation",
     "ac2g", "async", "fwdbwd", "Python", "glow_runtime"}
)  # fmt: skip
_NEW = object()  # a category not seen yet


class Feed(Protocol):
    """What fold (read_torch_trace) hands the CUDA events to as it reads them (the time breakdown).

    For each (category, name) of `cats` first seen, keep(cat, name) says where its events go:
    None for nowhere, else a function giving, for a device (None for host calls), the two
    arrays that get each event's ts and dur (events with dur < 0 are left out); flush() after
    every `every` events kept (the arrays stay the same objects). spans(...) gets, at the end,
    (first ts, latest ts + dur, that event's ts and dur) over all of `cats`.
    """

    cats: frozenset[str]

    def keep(self, cat: str, name: object) -> Callable[[object], tuple[array, array]] | None: ...

    def spans(self, lo: float, hi: float, hi_ts: float, hi_dur: float) -> None: ...

    every: float  # flush() is called after every this many events kept

    def flush(self) -> None: ...

    def finish(self) -> bool:
        """Called once the trace is read: False where its events came out of time order beyond
        what the feed folds (the trace is then read again, with a feed made for keep_all)."""
        ...


class Folded:
    """What fold() found: acc (kind or category, name) -> [calls, total_us, bytes, ...]; the span
    [lo, hi] of every complete event (us); fed (first ts, latest end, its ts, its dur) of the
    events of the feed's categories; cats, every category of a complete event, each with whether
    its first event looked like device work (an args.device or args.stream, a "stream N" thread)."""

    def __init__(self) -> None:
        self.acc: dict[tuple[Any, Any], list] = {}
        self.lo, self.hi = float("inf"), float("-inf")
        self.fed = (float("inf"), float("-inf"), 0.0, 0.0)
        self.cats: dict[Any, bool] = {}


def _looks_gpu(ev: dict) -> bool:
    args = ev.get("args")
    on_device = isinstance(args, dict) and ("device" in args or "stream" in args)
    return on_device or str(ev.get("tid")).startswith("stream")


def _records(evs: list[Any]) -> list[tuple]:
    """(ts, dur, cat, name, event) of the complete events of decoded elements; a field missing
    reads as .get gives it (dur 0, name ""), an element that is not an object is left out."""
    try:
        return [(ev["ts"], ev["dur"], ev["cat"], ev["name"], ev) for ev in evs if ev["ph"] == "X"]
    except (KeyError, TypeError):  # a field missing, or not an object at all
        pass
    return [
        (ev.get("ts"), ev.get("dur"), ev.get("cat"), ev.get("name", ""), ev)
        for ev in evs
        if isinstance(ev, dict) and ev.get("ph") == "X"
    ]


def _device(source: Any) -> Any:
    """A GPU event's device: args.device, else its pid (json's dict, or msgspec's Event)."""
    if type(source) is not dict:
        return kineto_fast.device(source)
    args, pid = source.get("args"), source.get("pid", -1)
    return args.get("device", pid) if args else pid


def _bytes(source: Any) -> int:
    """A copy's args.bytes, 0 where it has none (json's dict, or msgspec's Event)."""
    if type(source) is not dict:
        return int(kineto_fast.nbytes(source) or 0)
    return int((source.get("args") or {}).get("bytes", 0) or 0)


def fold(
    batches: Iterable[list[Any]], cpu_ops: bool, feed: Any, out: Folded, cpu: Any = None
) -> None:
    """Count the events of `batches` into `out` (Folded), feeding `feed` (or None) as it goes,
    and each CPU op's calls to `cpu` (a kineto_cpu.CpuUnions, or None). A batch is a list of
    decoded elements (json's dicts) or the kineto_fast.Records of one msgspec decoded.

    TypeError, ValueError or AttributeError: an event that is not a Chrome trace event we can
    trust (a string ts, a list for args); the caller names it."""
    fed = feed.cats if feed is not None else frozenset()
    every, kept = (feed.every, 0) if feed is not None else (0, 0)
    cpu_every, cpu_kept = (cpu.every, 0) if cpu is not None else (0, 0)
    if cpu is not None:
        cpu_ts, cpu_dur, cpu_op = cpu.ts.append, cpu.dur.append, cpu.op.append
    kinds = KIND_BY_CAT if cpu_ops else {k: v for k, v in KIND_BY_CAT.items() if v != "cpu"}
    acc = out.acc
    names_by_key: dict[Any, dict] = {}  # kind (else category) -> name -> the slot in acc
    tables: dict[Any, tuple | None] = {}  # category -> (names, kind, ...) or None: not counted
    lo, hi = out.lo, out.hi
    cuda_lo, cuda_hi, hi_ts, hi_dur = out.fed
    collect = gc.isenabled()
    gc.disable()
    try:
        for evs in batches:
            for ts, dur, cat, name, source in evs if type(evs) is Records else _records(evs):
                if ts is None:
                    continue
                dur = dur or 0
                end = ts + dur
                if ts < lo:
                    lo = ts
                if end > hi:
                    hi = end
                table = tables.get(cat, _NEW)
                if table is None:
                    continue
                if table is _NEW:
                    kind, hooked = kinds.get(cat), cat in fed
                    if cat not in out.cats:
                        out.cats[cat] = _looks_gpu(
                            source if type(source) is dict else as_dict(source)
                        )
                    table = tables[cat] = (
                        (
                            names_by_key.setdefault(kind or cat, {}),
                            kind,
                            kind == "memcpy",
                            hooked,
                            cat in HOST_CATS,
                            kind == "cpu" and cpu is not None,
                        )
                        if kind is not None or hooked
                        else None
                    )
                    if table is None:
                        continue
                names, kind, memcpy, hooked, host, timed = table
                slot = names.get(name)
                if slot is None:
                    keep = feed.keep(cat, name) if hooked else None
                    op = cpu.index(name) if timed else None
                    slot = names[name] = acc[(kind or cat, name)] = [0, 0.0, 0, keep, {}, op]
                slot[0] += 1
                slot[1] += dur
                if memcpy:
                    slot[2] += _bytes(source)
                if timed:  # a CPU op: its calls go to the per-op unions
                    cpu_ts(ts)
                    cpu_dur(dur)
                    cpu_op(slot[5])
                    cpu_kept += 1
                    if cpu_kept >= cpu_every:
                        cpu.flush()
                        cpu_kept = 0
                if not hooked:
                    continue
                if ts < cuda_lo:
                    cuda_lo = ts
                if end > cuda_hi:
                    cuda_hi, hi_ts, hi_dur = end, ts, dur
                if slot[3] is None or dur < 0:
                    continue
                # GPU events name their device (args.device, else the pid); host calls none.
                # Where a name's events go is asked once per name and device.
                dev = None if host else _device(source)
                appends = slot[4].get(dev)
                if appends is None:
                    pair = slot[3](dev)
                    appends = slot[4][dev] = (pair[0].append, pair[1].append)
                appends[0](ts)
                appends[1](dur)
                kept += 1
                if kept >= every:
                    feed.flush()
                    kept = 0
    finally:
        if collect:
            gc.enable()
        out.lo, out.hi, out.fed = lo, hi, (cuda_lo, cuda_hi, hi_ts, hi_dur)


# --- what kind of device the GPU events come from: CUDA, HIP/ROCm (a ROCm build writes its HIP
# calls under cuda_runtime), none (a CPU-only trace), or a kind this reader does not know (an MTIA
# build's mtia_runtime and mtia_ccp_events), refused rather than read as CPU-only.
CUDA, HIP = "CUDA", "HIP/ROCm"  # RankProfile.device_kind
# The HIP calls that are the paper's (and the other launch) metrics on a ROCm build: each is a
# metric of its own, named as HIP names it, beside the CUDA call it stands for.
HIP_METRICS = {
    "hipLaunchKernel": "cudaLaunchKernel",
    "hipStreamSynchronize": "cudaStreamSynchronize",
    "hipEventSynchronize": "cudaEventSynchronize",
    "hipEventDestroy": "cudaEventDestroy",
    "hipMemcpyAsync": "cudaMemcpyAsync",
    "hipExtLaunchKernel": "cudaLaunchKernelExC",
    "hipModuleLaunchKernel": "cuLaunchKernel",
    "hipExtModuleLaunchKernel": "cuLaunchKernel",
    "hipGraphLaunch": "cudaGraphLaunch",
}
# Top-level keys a ROCm build's Kineto writes (roctracer or rocprofiler, HIP versions).
_ROCM_KEYS = ("roctracer_version", "rocprofiler_version", "hip_runtime_version",
              "hip_driver_version")  # fmt: skip


def unknown_gpu(path: Path, cats: dict[Any, bool]) -> str:
    """Nothing ("") where every GPU-like category is one this reader knows; a warning line where
    some are not but others are; a ProfileError where all the trace's GPU events are of those."""
    known = GPU_WORK_CATS | KIND_BY_CAT.keys() | OTHER_CATS
    odd = sorted(str(c) for c, gpu in cats.items() if gpu and c not in known)
    if not odd:
        return ""
    if not any(c in GPU_WORK_CATS for c in cats):
        raise ProfileError(
            path,
            f"no GPU events this reader knows, but GPU-like events of categories {', '.join(odd)}"
            f" (categories found: {', '.join(sorted(map(str, cats)))}): a Kineto trace of a"
            " shape this reader does not know",
        )
    return f"GPU-like events of categories {', '.join(odd)} not known to this reader: left out"


def device_kind(meta: dict[str, Any], acc: dict[tuple[str, str], list], cats: dict) -> str:
    """HIP where the trace says it came from a ROCm build (its keys, its hip* calls), CUDA where
    it holds GPU work or CUDA calls, else "" (a CPU-only trace)."""
    calls = [raw for kind, raw in acc if kind == "runtime"]
    if any(k in meta for k in _ROCM_KEYS) or any(str(c).startswith("hip") for c in calls):
        return HIP
    return CUDA if calls or any(c in GPU_WORK_CATS for c in cats) else ""


def hip_metric(raw: str) -> str | None:
    """The HIP metric of a HIP call's name (HIP_METRICS), None for a call no metric reads."""
    name = raw.strip()
    return name if name in HIP_METRICS else None
