"""Synthetic profiles in the real on-disk formats, for tests and the parser benchmark.

`NSYS_SCHEMA` follows the tables of an `nsys export --type sqlite` file (nsys 2023-2025 column
sets for the tables the reader uses). Both generators write a fixed template of events over and
over with shifted timestamps, so the expected aggregate is known exactly without re-reading.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

NSYS_SCHEMA = """
CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE ENUM_CUDA_MEMCPY_OPER (id INTEGER NOT NULL PRIMARY KEY, name TEXT NOT NULL,
    label TEXT NOT NULL);
CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT, localTime TEXT);
CREATE TABLE ANALYSIS_DETAILS (globalVid INTEGER NOT NULL, duration INTEGER NOT NULL,
    startTime INTEGER NOT NULL, stopTime INTEGER NOT NULL);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL,
    eventClass INTEGER NOT NULL, globalTid INTEGER, correlationId INTEGER,
    nameId INTEGER NOT NULL REFERENCES StringIds(id), returnValue INTEGER NOT NULL,
    callchainId INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL,
    deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, greenContextId INTEGER,
    streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
    demangledName INTEGER NOT NULL REFERENCES StringIds(id),
    shortName INTEGER NOT NULL REFERENCES StringIds(id), mangledName INTEGER REFERENCES StringIds(id),
    launchType INTEGER, cacheConfig INTEGER, registersPerThread INTEGER NOT NULL,
    gridX INTEGER NOT NULL, gridY INTEGER NOT NULL, gridZ INTEGER NOT NULL,
    blockX INTEGER NOT NULL, blockY INTEGER NOT NULL, blockZ INTEGER NOT NULL,
    staticSharedMemory INTEGER NOT NULL, dynamicSharedMemory INTEGER NOT NULL,
    localMemoryPerThread INTEGER NOT NULL, localMemoryTotal INTEGER NOT NULL,
    gridId INTEGER NOT NULL, sharedMemoryExecuted INTEGER, graphNodeId INTEGER,
    sharedMemoryLimitConfig INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, end INTEGER NOT NULL,
    deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, greenContextId INTEGER,
    streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
    bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL REFERENCES ENUM_CUDA_MEMCPY_OPER(id),
    deprecatedSrcId INTEGER, srcKind INTEGER, dstKind INTEGER, srcDeviceId INTEGER,
    srcContextId INTEGER, dstDeviceId INTEGER, dstContextId INTEGER, migrationCause INTEGER,
    graphNodeId INTEGER, virtualAddress INTEGER);
"""

# ENUM_CUDA_MEMCPY_OPER as newer nsys writes it, and the short labels of older versions.
MEMCPY_OPER = [
    (0, "CUDA_MEMCPY_OPER_UNKNOWN", "Unknown", "Unknown"),
    (1, "CUDA_MEMCPY_OPER_HTOD", "Host-to-Device", "HtoD"),
    (2, "CUDA_MEMCPY_OPER_DTOH", "Device-to-Host", "DtoH"),
    (3, "CUDA_MEMCPY_OPER_HTOA", "Host-to-Array", "HtoA"),
    (4, "CUDA_MEMCPY_OPER_ATOH", "Array-to-Host", "AtoH"),
    (5, "CUDA_MEMCPY_OPER_ATOA", "Array-to-Array", "AtoA"),
    (6, "CUDA_MEMCPY_OPER_ATOD", "Array-to-Device", "AtoD"),
    (7, "CUDA_MEMCPY_OPER_DTOA", "Device-to-Array", "DtoA"),
    (8, "CUDA_MEMCPY_OPER_DTOD", "Device-to-Device", "DtoD"),
    (9, "CUDA_MEMCPY_OPER_HTOH", "Host-to-Host", "HtoH"),
    (10, "CUDA_MEMCPY_OPER_PTOP", "Peer-to-Peer", "PtoP"),
]

# Template of one "step": (table, name or copyKind, duration ns, bytes).
_STEP = [
    ("runtime", "cudaLaunchKernel_v7000", 4_000, 0),
    ("runtime", "cudaLaunchKernel_v7000", 5_000, 0),
    ("runtime", "cudaLaunchKernel_v7000", 6_000, 0),
    ("runtime", "cudaMemcpyAsync_v3020", 9_000, 0),
    ("runtime", "cudaStreamSynchronize_v3020", 50_000, 0),
    ("runtime", "cudaEventSynchronize_v3020", 20_000, 0),
    ("runtime", "cudaEventDestroy_v3020", 1_000, 0),
    ("runtime", "cudaMalloc_v3020", 3_000, 0),
    ("kernel", "ncclDevKernel_AllGather_RING_LL", 70_000, 0),
    ("kernel", "ncclDevKernel_Broadcast_RING_LL", 30_000, 0),
    ("kernel", "ncclDevKernel_ReduceScatter_RING_LL", 40_000, 0),
    ("kernel", "sm90_xmma_gemm_bf16bf16_bf16f32", 90_000, 0),
    ("memcpy", 1, 8_000, 1 << 20),
    ("memcpy", 2, 7_000, 1 << 16),
    ("memcpy", 8, 2_000, 1 << 18),
    ("memcpy", 10, 3_000, 1 << 18),
]
_STEP_NS = 400_000  # each step occupies this much wall time
_BATCH_STEPS = 5_000


def write_nsys_sqlite(
    path: str | os.PathLike[str], size_mb: float, short_labels: bool = False
) -> dict[str, tuple[int, int, int]]:
    """Write an nsys-schema SQLite file of at least `size_mb` MB.

    Returns the expected aggregate per raw name: (calls, total ns, bytes).
    """
    path = Path(path)
    path.unlink(missing_ok=True)
    con = sqlite3.connect(path)
    try:
        con.execute("PRAGMA journal_mode=OFF")
        con.execute("PRAGMA synchronous=OFF")
        con.executescript(NSYS_SCHEMA)
        strings = sorted({n for t, n, _, _ in _STEP if t != "memcpy"})
        ids = {s: i + 1 for i, s in enumerate(strings)}
        con.executemany("INSERT INTO StringIds VALUES (?, ?)", [(i, s) for s, i in ids.items()])
        con.executemany(
            "INSERT INTO ENUM_CUDA_MEMCPY_OPER VALUES (?, ?, ?)",
            [(i, n, short if short_labels else long) for i, n, long, short in MEMCPY_OPER],
        )
        page_size = con.execute("PRAGMA page_size").fetchone()[0]
        target_pages = size_mb * 1e6 / page_size
        steps = 0
        while con.execute("PRAGMA page_count").fetchone()[0] < target_pages:
            _insert_batch(con, ids, steps, _BATCH_STEPS)
            steps += _BATCH_STEPS
            con.commit()
        wall = steps * _STEP_NS
        con.execute("INSERT INTO ANALYSIS_DETAILS VALUES (0, ?, 0, ?)", (wall, wall))
        con.commit()
    finally:
        con.close()
    expected: dict[str, tuple[int, int, int]] = {}
    for table, name, dur, nbytes in _STEP:
        key = f"memcpy:{name}" if table == "memcpy" else str(name)
        calls, total, total_bytes = expected.get(key, (0, 0, 0))
        expected[key] = (calls + steps, total + dur * steps, total_bytes + nbytes * steps)
    return expected


# Constant columns are SQL literals: binding only the varying ones roughly halves insert time.
_INSERT_RUNTIME = (
    "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, 1, 16777233, ?, ?, 0, NULL)"
)
_INSERT_KERNEL = (
    "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, 0, 1, NULL, 7, ?, 16777216, ?, ?, NULL,"
    " 1, 0, 32, 8, 1, 1, 256, 1, 1, 0, 0, 0, 0, ?, 0, NULL, 0)"
)
_INSERT_MEMCPY = (
    "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (?, ?, 0, 1, NULL, 7, ?, 16777216, ?, ?, NULL,"
    " 1, 2, 0, 1, 0, 1, 0, NULL, NULL)"
)


def _insert_batch(con: sqlite3.Connection, ids: dict[str, int], first: int, n: int) -> None:
    runtime, kernel, memcpy = [], [], []
    template = [
        (table, j * 20_000, dur, ids.get(name, name), nbytes)
        for j, (table, name, dur, nbytes) in enumerate(_STEP)
    ]
    for step in range(first, first + n):
        t = step * _STEP_NS
        corr = step * 64
        for j, (table, offset, dur, ref, nbytes) in enumerate(template):
            start = t + offset
            if table == "runtime":
                runtime.append((start, start + dur, corr + j, ref))
            elif table == "kernel":
                kernel.append((start, start + dur, corr + j, ref, ref, step))
            else:
                memcpy.append((start, start + dur, corr + j, nbytes, ref))
    con.executemany(_INSERT_RUNTIME, runtime)
    con.executemany(_INSERT_KERNEL, kernel)
    con.executemany(_INSERT_MEMCPY, memcpy)


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
    """Write a plain-JSON kineto-style trace of at least `size_mb` MB.

    Returns the expected aggregate per raw name: (calls, total us, bytes).
    """
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
    expected: dict[str, tuple[int, float, int]] = {}
    for _, name, dur, nbytes in _TORCH_EVENTS:
        expected[name] = (steps, dur * steps, (nbytes or 0) * steps)
    return expected
