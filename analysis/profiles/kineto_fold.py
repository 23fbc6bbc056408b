"""The per-event loop of the Kineto reader (torch_trace._aggregate): complete ("X") events counted
by (kind, name), their span, and the CUDA ones handed to a feed (breakdown_kineto.KinetoIntervals); then what
the categories found say of the device (CUDA, HIP/ROCm, none, unknown).

Batches are json's dicts or kineto_fast's Records, read through one (ts, dur, cat, name, source)
loop. Each category is looked up once (its kind, whether fed, whether a host call), each name
once in its category's table, and fed arrays are appended to through bound methods kept per
device. The cyclic collector is paused: decoded JSON holds no cycles, and it would otherwise walk
every batch once more.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from . import kineto_fast
from .kineto_fast import Records
from .metrics import ProfileError

# Aggregation keys: (kind, raw name). Capitalised categories: torch 1.8-1.10 (libkineto before its
# late-2021 renames).
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
# GPU work the readers know: a trace with none of it but GPU events of other categories is refused.
GPU_WORK_CATS = frozenset({"kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset"})
# Categories known not to be GPU work, whatever their args say (cuda_sync: a wait on an event).
OTHER_CATS = frozenset(
    {"python_function", "Trace", "overhead", "cuda_sync", "cuda_profiler_range",
     "cpu_instant_event", "gpu_user_annotation", "gpu_user_Annotation", "external_correlation",
     "ac2g", "async", "fwdbwd", "Python", "glow_runtime"}
)  # fmt: skip
_NEW = object()  # a category not seen yet


class Folded:
    """What fold() found: acc (kind or category, name) -> [calls, total_us, bytes, ...]; [lo, hi]
    of every complete event (us); fed as KinetoIntervals.spans gets it; cats: each category, with whether
    its first event looked like device work (args.device or args.stream, a "stream N" thread)."""

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
    """(ts, dur, cat, name, event) of the complete events; missing fields as .get gives them, an
    element that is not an object left out."""
    try:
        return [(ev["ts"], ev["dur"], ev["cat"], ev["name"], ev) for ev in evs if ev["ph"] == "X"]
    except (KeyError, TypeError):  # a field missing, or not an object at all
        return [
            (ev.get("ts"), ev.get("dur"), ev.get("cat"), ev.get("name", ""), ev)
            for ev in evs
            if isinstance(ev, dict) and ev.get("ph") == "X"
        ]


def _device(source: Any) -> Any:
    """A GPU event's args.device, else its pid."""
    if type(source) is not dict:
        return kineto_fast.device(source)
    args, pid = source.get("args"), source.get("pid", -1)
    return args.get("device", pid) if args else pid


def _bytes(source: Any) -> int:
    """A copy's args.bytes, 0 where it has none."""
    if type(source) is not dict:
        return int(kineto_fast.nbytes(source) or 0)
    return int((source.get("args") or {}).get("bytes", 0) or 0)


def fold(
    batches: Iterable[list[Any]], cpu_ops: bool, feed: Any, out: Folded, cpu: Any = None
) -> None:
    """Count the events of `batches` into `out`, feeding `feed` and each CPU op's calls to `cpu`
    (breakdown_kineto.CpuUnions), either None. TypeError, ValueError or AttributeError: an event we
    cannot trust (a string ts, a list for args); the caller names it."""
    fed = feed.cats if feed is not None else frozenset()
    every, kept = (feed.every, 0) if feed is not None else (0, 0)
    cpu_every, cpu_kept = (cpu.every, 0) if cpu is not None else (0, 0)
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
                        looks = _looks_gpu if type(source) is dict else kineto_fast.looks_gpu
                        out.cats[cat] = looks(source)
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
                    pair = cpu.calls(name) if timed else None
                    op = (pair[0].append, pair[1].append) if pair else None
                    slot = names[name] = acc[(kind or cat, name)] = [0, 0.0, 0, keep, {}, op]
                slot[0] += 1
                slot[1] += dur
                if memcpy:
                    slot[2] += _bytes(source)
                if timed:  # a CPU op: its calls go to the per-op unions
                    slot[5][0](ts)
                    slot[5][1](dur)
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


# --- the device: CUDA, HIP/ROCm (HIP calls under cuda_runtime), none (CPU-only), or unknown (an
# MTIA build's mtia_runtime and mtia_ccp_events), refused rather than read as CPU-only.
CUDA, HIP = "CUDA", "HIP/ROCm"  # RankProfile.device_kind
# HIP calls that are metrics on a ROCm build, named as HIP names them, and the CUDA call each is.
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
    """ "" where every GPU-like category is known; a warning line where some are not but others
    are; ProfileError where all the GPU events are of unknown ones."""
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
    """HIP for a ROCm build (its keys, its hip* calls), CUDA for GPU work or CUDA calls, else ""."""
    calls = [raw for kind, raw in acc if kind == "runtime"]
    if any(k in meta for k in _ROCM_KEYS) or any(str(c).startswith("hip") for c in calls):
        return HIP
    return CUDA if calls or any(c in GPU_WORK_CATS for c in cats) else ""


def hip_metric(raw: str) -> str | None:
    """The HIP metric of a HIP call's name, None for a call no metric reads."""
    name = raw.strip()
    return name if name in HIP_METRICS else None
