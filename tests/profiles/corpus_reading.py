"""An independent reading of real profiles, for the corpus tier (test_corpus.py).

Written for the test with the standard library only (sqlite3, json, gzip, re) and no import of
analysis/: the reader and its check never share a definition. It follows what the README and the
readers' docstrings promise, in the plainest way, row by row in Python (slow, but the corpus files
are small):

  calls, seconds, bytes  per metric: the paper's CUDA calls and the other launch APIs (a name
          with its _vNNNN and _ptsz suffixes dropped), NCCL kernels by name, copies by direction;
          an nsys call recorded with a backtrace row counted once; a batched copy as copyCount
  wall    nsys: the session in ANALYSIS_DETAILS where the capture is a timer (or not recorded),
          the CUDA activity span for a capture range or where there is no session; a session no
          record lies inside is placed at the first record; one that misses records is widened
          to hold them. Kineto: the first complete event's start to the last one's end
  breakdown  per device: the union of kernels, copies and memsets (busy), of non-NCCL kernels
          (compute), of NCCL kernels (comm), comm minus compute; the union of the host calls that
          wait for the GPU (host blocked); in integer ns (Kineto: ts * 1000 and dur * 1000,
          each rounded half to even from its exact value, in fractions.Fraction)
  cpu ops the calls of each Kineto CPU op, and the union of their intervals
"""

from __future__ import annotations

import gzip
import json
import re
import sqlite3
from collections import defaultdict
from contextlib import closing
from fractions import Fraction
from pathlib import Path

PAPER_CALLS = ("cudaLaunchKernel", "cudaStreamSynchronize", "cudaEventSynchronize",
               "cudaEventDestroy", "cudaMemcpyAsync")  # fmt: skip
OTHER_LAUNCHES = ("cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx", "cudaGraphLaunch")
HIP_CALLS = ("hipLaunchKernel", "hipStreamSynchronize", "hipEventSynchronize", "hipEventDestroy",
             "hipMemcpyAsync", "hipExtLaunchKernel", "hipModuleLaunchKernel",
             "hipExtModuleLaunchKernel", "hipGraphLaunch")  # fmt: skip
WAITS = ("cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize", "cudaMemcpy",
         "cudaMemcpy2D", "cudaMemcpy3D", "cudaMemcpyFromSymbol", "cuCtxSynchronize",
         "cuStreamSynchronize", "cuEventSynchronize", "cuMemcpy", "cuMemcpyDtoH", "cuMemcpyHtoD",
         "cuMemcpyDtoD", "hipDeviceSynchronize", "hipStreamSynchronize", "hipEventSynchronize",
         "hipMemcpy", "hipMemcpy2D", "hipMemcpy3D", "hipMemcpyFromSymbol", "hipMemcpyWithStream",
         "hipMemcpyDtoH", "hipMemcpyHtoD", "hipMemcpyDtoD")  # fmt: skip
DIRECTIONS = {"htod": "memcpy_htod", "host-to-device": "memcpy_htod",
              "dtoh": "memcpy_dtoh", "device-to-host": "memcpy_dtoh",
              "dtod": "memcpy_dtod", "device-to-device": "memcpy_dtod"}  # fmt: skip
CUPTI_KINDS = {1: "HtoD", 2: "DtoH", 8: "DtoD", 11: "Unified Host-to-Device",
               12: "Unified Device-to-Host", 13: "Unified Device-to-Device"}  # fmt: skip
RANGES = ("cudaprofilerapi", "nvtx")


def bare_call(name: str) -> str:
    """cudaMemcpyAsync_ptsz_v7000 -> cudaMemcpyAsync."""
    return re.sub(r"_(ptsz|ptds)$", "", re.sub(r"_v\d+$", "", name.strip()))


def nccl(kernel: str) -> str | None:
    base = kernel.strip()
    base = base[5:] if base.startswith("void ") else base
    base = re.split(r"[(<]", base, maxsplit=1)[0].strip()
    if not re.match(r"nccl(Dev)?Kernel_", base):
        return None
    if re.match(r"nccl(Dev)?Kernel_AllGather_RING_LL($|_)", base):
        return "nccl_allgather_ring_ll"
    if re.match(r"nccl(Dev)?Kernel_Broadcast($|_)", base):
        return "nccl_broadcast"
    return "nccl_other"


def direction(label: str) -> str | None:
    text = label.strip().lower()
    for prefix in ("[cuda memcpy ", "cuda memcpy ", "memcpy "):
        text = text.removeprefix(prefix)
    text = text.split(" (")[0].rstrip("]").strip()
    if text.startswith(("unified", "uvm")):
        return "memcpy_unified"
    return DIRECTIONS.get(text)


def exact_ns(us: float) -> int:
    """Microseconds as whole ns, rounded half to even from the value's exact binary fraction."""
    return us * 1000 if isinstance(us, int) else round(Fraction(us) * 1000)


def union(intervals: list[tuple[int, int]]) -> int:
    total, reach = 0, None
    for s, e in sorted(intervals):
        if reach is None or s > reach:
            total += max(e - s, 0)
            reach = max(e, s)
        elif e > reach:
            total += e - reach
            reach = e
    return total


def _breakdown(gpu: dict, waits: list[tuple[int, int]]) -> dict:
    """gpu: device -> list of (start, end, kind) with kind compute/comm/copy/memset."""
    out = {}
    for dev, rows in gpu.items():
        comp = [(s, e) for s, e, k in rows if k == "compute"]
        comm = [(s, e) for s, e, k in rows if k == "comm"]
        out[dev] = {
            "busy": union([(s, e) for s, e, _ in rows]),
            "compute": union(comp),
            "comm": union(comm),
            "comm_not_overlapped": union(comp + comm) - union(comp),
            "kernels": len(comp) + len(comm),
            "copies": sum(k == "copy" for _, _, k in rows),
            "memsets": sum(k == "memset" for _, _, k in rows),
        }
    return {"devices": out, "host_blocked": union(waits)}


# --- nsys ------------------------------------------------------------------------------------


def nsys_figures(path: Path) -> dict:
    """Everything the corpus tier checks of one nsys export (module docstring)."""
    uri = f"{path.resolve().as_uri()}?mode=ro"
    with closing(sqlite3.connect(uri, uri=True)) as con:
        return _nsys(con)


def _cols(con: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in con.execute(f'PRAGMA table_info("{table}")')]


def _nsys(con: sqlite3.Connection) -> dict:
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    text = dict(con.execute("SELECT id, value FROM StringIds"))
    metrics: dict[str, list] = defaultdict(lambda: [0, 0, 0])  # calls, ns, bytes
    records: dict[str, list[tuple[int, int]]] = {}  # kind -> every (start, end), for the spans
    gpu: dict[int, list] = defaultdict(list)
    waits = []

    rt = "CUPTI_ACTIVITY_KIND_RUNTIME"
    if rt in tables:
        cols = _cols(con, rt)
        want = [c for c in ("eventClass", "globalTid", "correlationId") if c in cols]
        rows = con.execute(
            f'SELECT rowid, start, "end", nameId, {", ".join(want) or "0"} FROM {rt}'
        )
        rows = [
            dict(zip(["rowid", "start", "end", "nameId", *want], r, strict=False)) for r in rows
        ]
        rows = _calls_only(con, tables, rows, cols)
        records["calls"] = [(r["start"], r["end"]) for r in rows]
        for r in rows:
            name = bare_call(text.get(r["nameId"], ""))
            if name in PAPER_CALLS or name in OTHER_LAUNCHES:
                metrics[name][0] += 1
                metrics[name][1] += r["end"] - r["start"]
            if name in WAITS:
                waits.append((r["start"], r["end"]))

    kt = "CUPTI_ACTIVITY_KIND_KERNEL"
    if kt in tables:
        cols = _cols(con, kt)
        name_col = next(c for c in ("shortName", "demangledName", "mangledName") if c in cols)
        dev = "deviceId" if "deviceId" in cols else "-1"
        rows = con.execute(f'SELECT start, "end", {name_col}, {dev} FROM {kt}').fetchall()
        records["kernels"] = [(s, e) for s, e, _, _ in rows]
        for s, e, name_id, d in rows:
            metric = nccl(text.get(name_id, ""))
            gpu[d].append((s, e, "comm" if metric else "compute"))
            if metric:
                metrics[metric][0] += 1
                metrics[metric][1] += e - s

    ct = "CUPTI_ACTIVITY_KIND_MEMCPY"
    if ct in tables:
        cols = _cols(con, ct)
        labels = dict(CUPTI_KINDS)
        if "ENUM_CUDA_MEMCPY_OPER" in tables:
            col = "label" if "label" in _cols(con, "ENUM_CUDA_MEMCPY_OPER") else "name"
            for i, label in con.execute(f"SELECT id, {col} FROM ENUM_CUDA_MEMCPY_OPER"):
                labels[i] = str(label).removeprefix("CUDA_MEMCPY_OPER_")
        count = "copyCount" if "copyCount" in cols else "1"
        dev = "deviceId" if "deviceId" in cols else "-1"
        sql = f'SELECT start, "end", copyKind, "bytes", {count}, {dev} FROM {ct}'
        rows = con.execute(sql).fetchall()
        records["copies"] = [(s, e) for s, e, *_ in rows]
        for s, e, kind, nbytes, n, d in rows:
            gpu[d].append((s, e, "copy"))
            metric = direction(labels.get(kind, f"kind {kind}"))
            if metric:
                metrics[metric][0] += max(n or 1, 1)
                metrics[metric][1] += e - s
                metrics[metric][2] += nbytes or 0

    mt = "CUPTI_ACTIVITY_KIND_MEMSET"
    if mt in tables:
        dev = "deviceId" if "deviceId" in _cols(con, mt) else "-1"
        rows = con.execute(f'SELECT start, "end", {dev} FROM {mt}').fetchall()
        records["memsets"] = [(s, e) for s, e, _ in rows]
        for s, e, d in rows:
            gpu[d].append((s, e, "memset"))

    every = [iv for ivs in records.values() for iv in ivs]
    activity = (min(s for s, _ in every), max(e for _, e in every))
    session = None
    if "ANALYSIS_DETAILS" in tables:
        session = con.execute("SELECT startTime, stopTime FROM ANALYSIS_DETAILS").fetchone()
    capture = _capture(con, tables)
    wall, why, outside = _nsys_wall(session, activity, capture, records)
    return {
        "metrics": {m: tuple(v) for m, v in metrics.items()},
        "wall": wall,
        "wall_from": why,
        "outside": outside,
        "activity": activity,
        "kernel_rows": len(records.get("kernels", [])),
        **_breakdown(gpu, waits),
    }


def _calls_only(con: sqlite3.Connection, tables: set, rows: list[dict], cols: list) -> list[dict]:
    """Drop the second row nsys --cudabacktrace writes beside each call."""
    if "ENUM_NSYS_EVENT_CLASS" in tables and "eventClass" in cols:
        sql = (
            "SELECT id FROM ENUM_NSYS_EVENT_CLASS WHERE name = 'TRACE_PROCESS_EVENT_CUDABACKTRACE'"
        )
        drop = {i for (i,) in con.execute(sql)}
        if drop:
            return [r for r in rows if r["eventClass"] not in drop]
    if "globalTid" not in cols or "correlationId" not in cols:
        return rows
    kept: dict[tuple, dict] = {}
    for r in rows:
        corr = r["correlationId"] or -r["rowid"]
        key = (r["globalTid"], corr)
        old = kept.get(key)
        rank = (r.get("eventClass", 0), r["rowid"])
        if old is None or rank < (old.get("eventClass", 0), old["rowid"]):
            kept[key] = r
    return list(kept.values())


def _capture(con: sqlite3.Connection, tables: set) -> str:
    """ "default" (no capture settings), "range", "duration" or "whole run"."""
    if "META_DATA_CAPTURE" not in tables:
        return "default"
    found = {}
    for name, value in con.execute("SELECT name, value FROM META_DATA_CAPTURE"):
        if name in ("START_TRIGGER", "STOP_TRIGGER", "CAPTURE_RANGE", "RUN_DURATION_MS"):
            found[name] = (value or "").strip()
    start = found.get("CAPTURE_RANGE") or found.get("START_TRIGGER", "")
    if any(r in start.lower().replace(" ", "") for r in RANGES):
        return "range"
    if not start and not found.get("RUN_DURATION_MS"):
        return "default"
    return "duration" if int(float(found.get("RUN_DURATION_MS") or 0)) > 0 else "whole run"


def _nsys_wall(session, activity, capture, records) -> tuple[tuple[int, int], str, dict]:
    if capture == "range" or session is None:
        return activity, "CUDA activity span", {}
    lo, hi = session
    outside = {}
    for kind, ivs in records.items():
        n = sum(1 for s, e in ivs if s < lo or e > hi)
        if n:
            outside[kind] = n
    if hi <= activity[0] or lo >= activity[1]:  # no record inside: another clock
        lo, hi = activity[0], activity[0] + hi - lo
    return (min(lo, activity[0]), max(hi, activity[1])), "ANALYSIS_DETAILS session", outside


# --- Kineto ----------------------------------------------------------------------------------

RUNTIME_CATS = ("cuda_runtime", "cuda_driver", "Runtime")
KERNEL_CATS = ("kernel", "Kernel")
COPY_CATS = ("gpu_memcpy", "Memcpy")
MEMSET_CATS = ("gpu_memset", "Memset")
CPU_CATS = ("cpu_op", "Operator", "user_annotation")
ROCM_KEYS = ("roctracer_version", "rocprofiler_version", "hip_runtime_version",
             "hip_driver_version")  # fmt: skip


def kineto_figures(path: Path) -> dict:
    """Everything the corpus tier checks of one Kineto trace (module docstring)."""
    raw = path.read_bytes()
    doc = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    events = doc if isinstance(doc, list) else doc["traceEvents"]
    meta = doc if isinstance(doc, dict) else {}
    complete = [e for e in events if isinstance(e, dict) and e.get("ph") == "X"]
    complete = [e for e in complete if e.get("ts") is not None]
    calls = [e for e in complete if e.get("cat") in RUNTIME_CATS]
    hip = any(k in meta for k in ROCM_KEYS) or any(
        str(e.get("name", "")).startswith("hip") for e in calls
    )
    metrics: dict[str, list] = defaultdict(lambda: [0, 0.0, 0])  # calls, us, bytes
    gpu: dict[int, list] = defaultdict(list)
    waits, ops, kernels = [], defaultdict(list), 0

    def ns(e: dict) -> tuple[int, int]:
        start = exact_ns(e["ts"])
        return start, start + exact_ns(e.get("dur") or 0)

    def device(e: dict) -> int:
        args = e.get("args")
        return args.get("device", e.get("pid", -1)) if args else e.get("pid", -1)

    for e in complete:
        cat, name, dur = e.get("cat"), str(e.get("name", "")), e.get("dur") or 0
        if cat in RUNTIME_CATS:
            bare = name.strip() if hip else bare_call(name)
            if bare in (HIP_CALLS if hip else PAPER_CALLS + OTHER_LAUNCHES):
                metrics[bare][0] += 1
                metrics[bare][1] += dur
            if bare_call(name) in WAITS and dur >= 0:
                waits.append(ns(e))
        elif cat in KERNEL_CATS:
            kernels += 1
            metric = nccl(name)
            if dur >= 0:
                gpu[int(device(e))].append((*ns(e), "comm" if metric else "compute"))
            if metric:
                metrics[metric][0] += 1
                metrics[metric][1] += dur
        elif cat in COPY_CATS:
            if dur >= 0:
                gpu[int(device(e))].append((*ns(e), "copy"))
            metric = direction(name)
            if metric:
                metrics[metric][0] += 1
                metrics[metric][1] += dur
                metrics[metric][2] += int((e.get("args") or {}).get("bytes", 0) or 0)
        elif cat in MEMSET_CATS and dur >= 0:
            gpu[int(device(e))].append((*ns(e), "memset"))
        elif cat in CPU_CATS:
            ops[re.sub(r"^(ProfilerStep)#\d+$", r"\1", name)].append(ns(e))
    spans = [ns(e) for e in complete]
    out = {
        "metrics": {m: (c, us * 1000, b) for m, (c, us, b) in metrics.items()},
        "cpu_ops": {name: (len(ivs), union(ivs)) for name, ivs in ops.items()},
        "wall": (min(s for s, _ in spans), max(e for _, e in spans)),
        "wall_from": "trace span",
        "outside": {},
        "kernel_rows": kernels,
        "device_kind": "HIP/ROCm" if hip else "CUDA" if calls or gpu else "",
        **_breakdown(gpu, waits),
    }
    return out
