"""Synthetic profiles in the real on-disk formats, for tests and the parser benchmark.

NSYS_SCHEMAS: the tables the reader uses as three nsys generations write them: 2022.4 has no
ENUM_* tables (RUNTIME has eventClass already), 2024.4 adds ENUM_NSYS_EVENT_CLASS and
ENUM_CUDA_MEMCPY_OPER (id, name, label), 2025.3 adds MEMCPY.copyCount (CUPTI's batched copies)
and greenContextId. Both writers repeat a template of events with shifted timestamps, so the
expected aggregate is known without re-reading. The nsys template holds what real exports made
with `--cudabacktrace` hold: a backtrace row (event class 67) beside some calls, a batched copy
(copyCount 4) and a unified-memory copy.
"""

from __future__ import annotations

import operator
import os
import re
import sqlite3
from collections.abc import Callable
from pathlib import Path

_DETAILS = """CREATE TABLE ANALYSIS_DETAILS (globalVid INTEGER NOT NULL, duration INTEGER NOT NULL,
    startTime INTEGER NOT NULL, stopTime INTEGER NOT NULL);"""
_RUNTIME = """CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL,
    eventClass INTEGER NOT NULL, globalTid INTEGER, correlationId INTEGER,
    nameId INTEGER NOT NULL REFERENCES StringIds(id), returnValue INTEGER NOT NULL,
    callchainId INTEGER);"""
_KERNEL = """CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL,
    deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL,{green}
    streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
    demangledName INTEGER NOT NULL REFERENCES StringIds(id),
    shortName INTEGER NOT NULL REFERENCES StringIds(id), mangledName INTEGER REFERENCES StringIds(id),
    launchType INTEGER, cacheConfig INTEGER, registersPerThread INTEGER NOT NULL,
    gridX INTEGER NOT NULL, gridY INTEGER NOT NULL, gridZ INTEGER NOT NULL,
    blockX INTEGER NOT NULL, blockY INTEGER NOT NULL, blockZ INTEGER NOT NULL,
    staticSharedMemory INTEGER NOT NULL, dynamicSharedMemory INTEGER NOT NULL,
    localMemoryPerThread INTEGER NOT NULL, localMemoryTotal INTEGER NOT NULL,
    gridId INTEGER NOT NULL, sharedMemoryExecuted INTEGER, graphNodeId INTEGER,
    sharedMemoryLimitConfig INTEGER);"""
_MEMCPY = """CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, end INTEGER NOT NULL,
    deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL,{green}
    streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
    bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL,
    deprecatedSrcId INTEGER, srcKind INTEGER, dstKind INTEGER, srcDeviceId INTEGER,
    srcContextId INTEGER, dstDeviceId INTEGER, dstContextId INTEGER, migrationCause INTEGER,
    graphNodeId INTEGER{extra});"""
_COMMON = """
CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT, localTime TEXT);
"""
_ENUMS = """
CREATE TABLE ENUM_CUDA_MEMCPY_OPER (id INTEGER NOT NULL PRIMARY KEY, name TEXT NOT NULL,
    label TEXT NOT NULL);
CREATE TABLE ENUM_NSYS_EVENT_CLASS (id INTEGER NOT NULL PRIMARY KEY, name TEXT NOT NULL,
    label TEXT NOT NULL);
"""
_GREEN = "\n    greenContextId INTEGER,"


def _layout(enums: bool, green: str, extra: str) -> str:
    kernel, memcpy = _KERNEL.format(green=green), _MEMCPY.format(green=green, extra=extra)
    return "\n".join([_COMMON, *([_ENUMS] if enums else []), _DETAILS, _RUNTIME, kernel, memcpy])


NSYS_SCHEMAS: dict[str, str] = {
    "2022.4": _layout(False, "", ""),
    "2024.4": _layout(True, "", ",\n    virtualAddress INTEGER"),
    "2025.3": _layout(True, _GREEN, ",\n    virtualAddress INTEGER, copyCount INTEGER"),
}
NSYS_VERSIONS = tuple(NSYS_SCHEMAS)
NSYS_LATEST = NSYS_VERSIONS[-1]

# ENUM_CUDA_MEMCPY_OPER rows: (id, name, label as newer nsys writes it, older versions' label).
_SHORT = ("Unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA", "AtoD", "DtoA", "DtoD", "HtoH", "PtoP",
          "UVM HtoD", "UVM DtoH", "UVM DtoD")  # fmt: skip
_WORDS = {"H": "Host", "D": "Device", "A": "Array", "P": "Peer"}


def _label(short: str) -> str:
    *uvm, kind = short.split()
    words = f"{_WORDS[kind[0]]}-to-{_WORDS[kind[-1]]}" if "to" in kind else kind
    return "Unified " * len(uvm) + words


MEMCPY_OPER = [(i, "CUDA_MEMCPY_OPER_" + s.upper().replace(" ", "_"), _label(s), s)
               for i, s in enumerate(_SHORT)]  # fmt: skip
# ENUM_NSYS_EVENT_CLASS rows that CUDA tracing uses (ids as nsys documents them).
EVENT_CLASSES = [
    (0, "TRACE_PROCESS_EVENT_CUDA_RUNTIME", "CUDA runtime"),
    (1, "TRACE_PROCESS_EVENT_CUDA_DRIVER", "CUDA driver"),
    (67, "TRACE_PROCESS_EVENT_CUDABACKTRACE", "CUDA backtrace"),
]
RUNTIME_CLASS, DRIVER_CLASS, BACKTRACE_CLASS = 0, 1, 67
_API_SUFFIX = re.compile(r"_v\d+$")


def backtrace_name(call: str) -> str:
    """The name of a call's backtrace row: the API name without its `_v7000` suffix."""
    return _API_SUFFIX.sub("", call)


def insert_for(
    con: sqlite3.Connection, table: str, params: tuple[str, ...], fixed: dict[str, str]
) -> tuple[str, Callable[[tuple], tuple]]:
    """An INSERT into `table` as this file's schema has it, and a function cutting a tuple of
    `params` down to the columns it has; `fixed`: SQL literals for others, the rest get 0."""
    cols = [r[1] for r in con.execute(f'PRAGMA table_info("{table}")')]
    keep = [i for i, c in enumerate(params) if c in cols]
    values = {params[i]: "?" for i in keep}
    sql_values = [values.get(c) or fixed.get(c, "0") for c in cols]
    sql = f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join(sql_values)})"
    if len(keep) == len(params):
        return sql, lambda row: row
    if len(keep) == 1:
        one = keep[0]
        return sql, lambda row: (row[one],)
    return sql, operator.itemgetter(*keep)


def write_enums(con: sqlite3.Connection, short_labels: bool = False) -> None:
    """Fill the ENUM tables the schema has (none in nsys 2022)."""
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "ENUM_CUDA_MEMCPY_OPER" in tables:
        con.executemany(
            "INSERT INTO ENUM_CUDA_MEMCPY_OPER VALUES (?, ?, ?)",
            [(i, n, short if short_labels else long) for i, n, long, short in MEMCPY_OPER],
        )
    if "ENUM_NSYS_EVENT_CLASS" in tables:
        con.executemany("INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (?, ?, ?)", EVENT_CLASSES)


# Template of one "step": (table, name or copyKind, duration ns, bytes, n). n is, for a runtime
# call, 1 when nsys also wrote a backtrace row for it; for a copy record, its copyCount.
_STEP = [
    ("runtime", "cudaLaunchKernel_v7000", 4_000, 0, 1),
    ("runtime", "cudaLaunchKernel_v7000", 5_000, 0, 1),
    ("runtime", "cudaLaunchKernel_v7000", 6_000, 0, 0),
    ("runtime", "cudaMemcpyAsync_v3020", 9_000, 0, 0),
    ("runtime", "cudaStreamSynchronize_v3020", 50_000, 0, 1),
    ("runtime", "cudaEventSynchronize_v3020", 20_000, 0, 0),
    ("runtime", "cudaEventDestroy_v3020", 1_000, 0, 0),
    ("runtime", "cudaMalloc_v3020", 3_000, 0, 0),
    ("kernel", "ncclDevKernel_AllGather_RING_LL", 70_000, 0, 0),
    ("kernel", "ncclDevKernel_Broadcast_RING_LL", 30_000, 0, 0),
    ("kernel", "ncclDevKernel_ReduceScatter_RING_LL", 40_000, 0, 0),
    ("kernel", "sm90_xmma_gemm_bf16bf16_bf16f32", 90_000, 0, 0),
    ("memcpy", 1, 8_000, 1 << 20, 1),
    ("memcpy", 1, 6_000, 1 << 18, 4),  # one cudaMemcpyBatchAsync record of 4 copies
    ("memcpy", 2, 7_000, 1 << 16, 1),
    ("memcpy", 8, 2_000, 1 << 18, 1),
    ("memcpy", 10, 3_000, 1 << 18, 1),
    ("memcpy", 11, 5_000, 1 << 16, 1),  # unified memory page migration
]
_STEP_NS = 400_000  # each step occupies this much wall time
_BATCH_STEPS = 5_000


def write_nsys_sqlite(
    path: str | os.PathLike[str],
    size_mb: float,
    short_labels: bool = False,
    version: str = NSYS_LATEST,
) -> dict[str, tuple[int, int, int]]:
    """Write an nsys export in `version`'s schema of at least `size_mb` MB; returns the expected
    (calls, total ns, bytes) per raw name (copies as "memcpy:<copyKind>"), each copy of a batch a
    call where the schema has copyCount."""
    path = Path(path)
    path.unlink(missing_ok=True)
    con = sqlite3.connect(path)
    try:
        con.execute("PRAGMA journal_mode=OFF")
        con.execute("PRAGMA synchronous=OFF")
        con.executescript(NSYS_SCHEMAS[version])
        calls = {n for t, n, *_ in _STEP if t != "memcpy"}
        strings = sorted(calls | {backtrace_name(n) for t, n, *_ in _STEP if t == "runtime"})
        ids = {s: i + 1 for i, s in enumerate(strings)}
        con.executemany("INSERT INTO StringIds VALUES (?, ?)", [(i, s) for s, i in ids.items()])
        write_enums(con, short_labels)
        inserts = {
            kind: insert_for(con, f"CUPTI_ACTIVITY_KIND_{kind.upper()}", *spec)
            for kind, spec in (("runtime", (RUNTIME_PARAMS, RUNTIME_FIXED)),
                               ("kernel", (KERNEL_PARAMS, KERNEL_FIXED)),
                               ("memcpy", (MEMCPY_PARAMS, MEMCPY_FIXED)))
        }  # fmt: skip
        page_size = con.execute("PRAGMA page_size").fetchone()[0]
        target_pages = size_mb * 1e6 / page_size
        steps = 0
        while con.execute("PRAGMA page_count").fetchone()[0] < target_pages:
            _insert_batch(con, inserts, ids, steps, _BATCH_STEPS)
            steps += _BATCH_STEPS
            con.commit()
        wall = steps * _STEP_NS
        con.execute("INSERT INTO ANALYSIS_DETAILS VALUES (0, ?, 0, ?)", (wall, wall))
        con.commit()
    finally:
        con.close()
    expected: dict[str, tuple[int, int, int]] = {}
    batched = "copyCount" in NSYS_SCHEMAS[version]  # the schema counts batched copies
    for table, name, dur, nbytes, n in _STEP:
        key = f"memcpy:{name}" if table == "memcpy" else str(name)
        copies = n if table == "memcpy" and batched else 1
        calls_, total, total_bytes = expected.get(key, (0, 0, 0))
        expected[key] = (calls_ + copies * steps, total + dur * steps, total_bytes + nbytes * steps)
    return expected


# Constant columns are SQL literals: binding only the varying ones roughly halves insert time.
RUNTIME_PARAMS = ("start", "end", "eventClass", "correlationId", "nameId")
RUNTIME_FIXED = {"globalTid": "16777233", "callchainId": "NULL"}
KERNEL_PARAMS = ("start", "end", "correlationId", "demangledName", "shortName", "gridId")
KERNEL_FIXED = {"contextId": "1", "greenContextId": "NULL", "streamId": "7",
                "globalPid": "16777216", "mangledName": "NULL", "launchType": "1",
                "registersPerThread": "32", "gridX": "8", "gridY": "1", "gridZ": "1",
                "blockX": "256", "blockY": "1", "blockZ": "1", "graphNodeId": "NULL"}  # fmt: skip
MEMCPY_PARAMS = ("start", "end", "correlationId", "bytes", "copyKind", "copyCount")
MEMCPY_FIXED = {"contextId": "1", "greenContextId": "NULL", "streamId": "7",
                "globalPid": "16777216", "deprecatedSrcId": "NULL", "srcKind": "1",
                "dstKind": "2", "dstDeviceId": "0", "graphNodeId": "NULL",
                "virtualAddress": "NULL"}  # fmt: skip


def _insert_batch(
    con: sqlite3.Connection,
    inserts: dict[str, tuple[str, Callable[[tuple], tuple]]],
    ids: dict[str, int],
    first: int,
    n: int,
) -> None:
    rows: dict[str, list[tuple]] = {"runtime": [], "kernel": [], "memcpy": []}
    template = [
        (table, j * 20_000, dur, ids.get(name, name), nbytes, k,
         ids[backtrace_name(name)] if table == "runtime" else 0)
        for j, (table, name, dur, nbytes, k) in enumerate(_STEP)
    ]  # fmt: skip
    for step in range(first, first + n):
        t = step * _STEP_NS
        corr = step * 64 + 1  # CUPTI correlation ids start at 1 (0 means none)
        for j, (table, offset, dur, ref, nbytes, k, bt_ref) in enumerate(template):
            start = t + offset
            if table == "runtime":
                rows["runtime"].append((start, start + dur, RUNTIME_CLASS, corr + j, ref))
                if k:  # the backtrace row: same thread, correlation id and interval
                    rows["runtime"].append((start, start + dur, BACKTRACE_CLASS, corr + j, bt_ref))
            elif table == "kernel":
                rows["kernel"].append((start, start + dur, corr + j, ref, ref, step))
            else:
                rows["memcpy"].append((start, start + dur, corr + j, nbytes, ref, k))
    for table, (sql, cut) in inserts.items():
        con.executemany(sql, map(cut, rows[table]))


# Kineto-style events, written the way torch.profiler lays them out (one key per line).
_TORCH_EVENTS = [
    ("cpu_op", "aten::mm", 300.0, None),
    ("cuda_runtime", "cudaLaunchKernel", 5.5, None),
    ("cuda_runtime", "cudaMemcpyAsync", 9.25, None),
    ("cuda_runtime", "cudaStreamSynchronize", 50.0, None),
    ("kernel", "ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", 70.0,
     None),
    ("kernel", "ncclDevKernel_Broadcast_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", 30.0,
     None),
    ("kernel", "void at::native::vectorized_elementwise_kernel<4>(int)", 12.0, None),
    ("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 8.0, 1 << 20),
    ("gpu_memcpy", "Memcpy DtoH (Device -> Pageable)", 7.0, 1 << 16),
    ("gpu_memcpy", "Memcpy DtoD (Device -> Device)", 2.0, 1 << 18),
]  # fmt: skip
_TORCH_STEP_US = 1_000.0


def write_torch_trace(
    path: str | os.PathLike[str], size_mb: float
) -> dict[str, tuple[int, float, int]]:
    """Write a plain-JSON Kineto trace of at least `size_mb` MB; returns the expected (calls,
    total us, bytes) per raw name."""
    path = Path(path)
    target = size_mb * 1e6
    steps = 0
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(
            '{\n  "schemaVersion": 1,\n  "deviceProperties": [{"id": 0, "name": "synthetic"}],\n'
            '  "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1},\n'
            '  "displayTimeUnit": "ms",\n  "traceEvents": [\n'
        )
        written, sep = 0, ""
        while written < target:
            chunk = []
            for step in range(steps, steps + 2_000):
                base = 1_700_000_000_000.0 + step * _TORCH_STEP_US
                for j, (cat, name, dur, nbytes) in enumerate(_TORCH_EVENTS):
                    args = f'"correlation": {step * 16 + j}'
                    if nbytes is not None:
                        args += f', "bytes": {nbytes}, "memory bandwidth (GB/s)": 1.5'
                    pid, tid = (0, 7) if cat in ("kernel", "gpu_memcpy") else (4242, 4242)
                    chunk.append(
                        f'{sep}  {{\n    "ph": "X", "cat": "{cat}", "name": "{name}", '
                        f'"pid": {pid}, "tid": {tid},\n    "ts": {base + j * 50.0:.3f}, '
                        f'"dur": {dur},\n    "args": {{\n      {args}\n    }}\n  }}'
                    )
                    sep = ",\n"
            steps += 2_000
            text = "".join(chunk)
            fh.write(text)
            written += len(text)
        fh.write('\n  ],\n  "traceName": "synthetic"\n}\n')
    return {
        name: (steps, dur * steps, (nbytes or 0) * steps) for _, name, dur, nbytes in _TORCH_EVENTS
    }
