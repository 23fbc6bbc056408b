"""Builders for small profiles in the real on-disk formats (nsys SQLite export, kineto JSON).

A plain module (not conftest) so test files can import it by a name no other folder uses.
"""

from __future__ import annotations

import gzip
import json
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
import pytest
from corpus_reading import kineto_figures, nsys_figures

from analysis.profiles.cli import main
from analysis.profiles.metrics import MetricTotal, TidyRow, metric_totals, read_metrics_rows
from analysis.profiles.synth import (
    BACKTRACE_CLASS,
    DRIVER_CLASS,
    KERNEL_FIXED,
    KERNEL_PARAMS,
    MEMCPY_FIXED,
    MEMCPY_PARAMS,
    NSYS_LATEST,
    NSYS_SCHEMAS,
    RUNTIME_CLASS,
    RUNTIME_FIXED,
    RUNTIME_PARAMS,
    backtrace_name,
    insert_for,
    write_enums,
)

REPO = Path(__file__).resolve().parents[2]
TID = 281474993487889  # globalTid of the one traced thread (pid and tid packed, as nsys does)


def make_nsys(
    path: Path,
    runtime: list[tuple[str, int, int]],
    kernels: list[tuple[str, int, int]] = (),
    memcpy: list[tuple[int, ...]] = (),
    short_labels: bool = False,
    details: tuple[int, int] | None = None,
    version: str = NSYS_LATEST,
    backtraces: bool = False,
) -> Path:
    """SQLite file with the nsys export tables as nsys `version` writes them (synth.NSYS_SCHEMAS).

    runtime: (API name, start ns, end ns); a name starting "cu" but not "cuda" is a driver call.
    kernels: (short name, start, end). memcpy: (copyKind id, start, end, bytes[, copyCount]);
    copyCount is dropped where the schema has no such column. details: ANALYSIS_DETAILS
    (startTime, stopTime). backtraces: every call also gets the row `nsys --cudabacktrace`
    writes (event class 67, same globalTid and correlationId, name without the _v suffix).
    """
    con = sqlite3.connect(path)
    con.executescript(NSYS_SCHEMAS[version])
    strings: dict[str, int] = {}

    def sid(text: str) -> int:
        return strings.setdefault(text, len(strings) + 1)

    write_enums(con, short_labels)
    sql, cut = insert_for(con, "CUPTI_ACTIVITY_KIND_RUNTIME", RUNTIME_PARAMS,
                          {**RUNTIME_FIXED, "globalTid": str(TID)})  # fmt: skip
    rows = []
    for i, (n, s, e) in enumerate(runtime):
        cls = DRIVER_CLASS if n.startswith("cu") and not n.startswith("cuda") else RUNTIME_CLASS
        rows.append((s, e, cls, i + 1, sid(n)))
        if backtraces:
            rows.append((s, e, BACKTRACE_CLASS, i + 1, sid(backtrace_name(n))))
    con.executemany(sql, map(cut, rows))
    sql, cut = insert_for(con, "CUPTI_ACTIVITY_KIND_KERNEL", KERNEL_PARAMS, KERNEL_FIXED)
    con.executemany(
        sql,
        map(cut, [(s, e, i, sid(f"{n}(ncclDevComm *, unsigned long, ncclWork *)"), sid(n), i)
                  for i, (n, s, e) in enumerate(kernels)]),
    )  # fmt: skip
    sql, cut = insert_for(con, "CUPTI_ACTIVITY_KIND_MEMCPY", MEMCPY_PARAMS, MEMCPY_FIXED)
    con.executemany(
        sql, map(cut, [(m[1], m[2], i, m[3], m[0], m[4] if len(m) > 4 else 1)
                       for i, m in enumerate(memcpy)])
    )  # fmt: skip
    con.executemany("INSERT INTO StringIds VALUES (?, ?)", [(i, s) for s, i in strings.items()])
    if details:
        lo, hi = details
        con.execute("INSERT INTO ANALYSIS_DETAILS VALUES (0, ?, ?, ?)", (hi - lo, lo, hi))
    con.commit()
    con.close()
    return set_release(path, version)


def set_release(path: Path, release: str, key: str = "EXPORT_PRODUCT_VERSION") -> Path:
    """Name the nsys release in META_DATA_EXPORT (name/value rows), where nsys records it."""
    with sqlite3.connect(path) as con:
        con.execute(
            "CREATE TABLE IF NOT EXISTS META_DATA_EXPORT (name TEXT PRIMARY KEY, value TEXT)"
        )
        con.execute("INSERT OR REPLACE INTO META_DATA_EXPORT VALUES (?, ?)", (key, release))
    con.close()
    return path


def kineto_event(cat: str, name: str, ts: float, dur: float, **args: object) -> dict:
    """One complete ("X") event as kineto writes it."""
    pid, tid = (0, 7) if cat in ("kernel", "gpu_memcpy") else (1234, 1234)
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur,
            "args": args}  # fmt: skip


def write_trace(path: Path, events: list[dict], **meta: object) -> Path:
    """Kineto-like JSON (gzip when the name ends in .gz), pretty-printed like torch writes it."""
    doc = {"schemaVersion": 1, "deviceProperties": [], **meta, "traceEvents": events,
           "traceName": str(path)}  # fmt: skip
    text = json.dumps(doc, indent=2)
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


def gpu_trace_events() -> list[dict]:
    """Events of a GPU trace: runtime calls, NCCL kernels, memcpy of every kind (times in us)."""
    ev = kineto_event
    return [
        {"ph": "M", "name": "process_name", "ts": 0, "pid": 0, "tid": 0, "args": {"name": "gpu"}},
        ev("Trace", "PyTorch Profiler (0)", 1000.0, 10000.0),
        ev("cuda_runtime", "cudaLaunchKernel", 1100.0, 5.0, correlation=1),
        ev("cuda_runtime", "cudaLaunchKernel", 1200.0, 7.0, correlation=2),
        ev("cuda_runtime", "cudaStreamSynchronize", 1300.0, 400.0),
        ev("cuda_runtime", "cudaEventSynchronize", 1800.0, 100.0),
        # real Kineto drops cudaEventDestroy (coverage.UNRECORDABLE); kept to test the reader
        ev("cuda_runtime", "cudaEventDestroy", 1950.0, 2.0),
        ev("cuda_runtime", "cudaMemcpyAsync", 2000.0, 20.0),
        ev("cuda_runtime", "cudaMalloc", 2100.0, 30.0),
        ev("cuda_driver", "cuLaunchKernel", 2200.0, 4.0),
        ev("kernel", "ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
           3000.0, 250.0),
        ev("kernel", "ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
           4000.0, 150.0),
        ev("kernel", "ncclDevKernel_Broadcast_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
           5000.0, 80.0),
        ev("kernel", "ncclDevKernel_AllGather_RING_LL128(ncclDevComm*, unsigned long, ncclWork*)",
           6000.0, 60.0),
        ev("kernel", "void at::native::vectorized_elementwise_kernel<4>(int)", 7000.0, 9.0),
        ev("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 8000.0, 12.0, bytes=602112),
        ev("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", 8100.0, 6.0, bytes=1000),
        ev("gpu_memcpy", "Memcpy DtoH (Device -> Pageable)", 8200.0, 3.0, bytes=4),
        ev("gpu_memcpy", "Memcpy DtoD (Device -> Device)", 8300.0, 2.0, bytes=2048),
        ev("gpu_memset", "Memset (Device)", 8400.0, 1.0, bytes=64),
        ev("cpu_op", "aten::mm", 1050.0, 300.0),
        ev("user_annotation", "ProfilerStep#1", 1000.0, 5000.0),
        ev("user_annotation", "ProfilerStep#2", 6000.0, 4000.0),
        {"ph": "s", "id": 1, "pid": 1234, "tid": 1234, "ts": 1100.0, "cat": "ac2g", "name": "ac2g"},
        {"ph": "i", "s": "t", "name": "Iteration Start", "pid": 1234, "tid": 1234, "ts": 1000.0},
    ]  # fmt: skip


def cli_fails(tmp_path: Path, good: Path, bad: Path, needle: str) -> None:
    """`analysis.profiles.cli` on a good and a bad file in tmp_path: exit 1, one stderr line
    naming the bad file and `needle`, the older CSV untouched and no file left behind."""
    out = tmp_path / "metrics.csv"
    out.write_text("previous,content\n")  # an older result must survive a failed run
    proc = subprocess.run(
        [sys.executable, "-m", "analysis.profiles.cli", "--run", "x", "--out", str(out),
         str(good), str(bad)],
        cwd=REPO, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and str(bad) in lines[0] and needle in lines[0], proc.stderr
    assert out.read_text() == "previous,content\n"
    assert {p.name for p in tmp_path.iterdir()} == {"metrics.csv", bad.name, good.name}


def add_capture_settings(
    path: Path, settings: dict[str, str] | list[tuple[str, str | None]]
) -> Path:
    """Give an export the META_DATA_CAPTURE table nsys 2023.3+ writes: name/value rows with no key,
    in the order given (a name may repeat: one CAPTURE_EVENT_TYPE row per traced API)."""
    rows = list(settings.items()) if isinstance(settings, dict) else list(settings)
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE META_DATA_CAPTURE (name TEXT NOT NULL, value TEXT)")
        con.executemany("INSERT INTO META_DATA_CAPTURE VALUES (?, ?)", rows)
    con.close()
    return path


def add_memsets(path: Path, spans: list[tuple[int, int]]) -> Path:
    """Give an export CUPTI_ACTIVITY_KIND_MEMSET rows (start, end ns); the reader spans them only."""
    with sqlite3.connect(path) as con:
        con.execute(
            "CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER NOT NULL, end INTEGER NOT NULL,"
            " deviceId INTEGER, contextId INTEGER, streamId INTEGER, correlationId INTEGER,"
            " value INTEGER, bytes INTEGER)"
        )
        con.executemany(
            "INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET (start, end, value, bytes) VALUES (?, ?, 0, 64)",
            spans,
        )
    con.close()
    return path


def read_metrics_csv(path: Path) -> pd.DataFrame:
    """A metrics CSV's rows (metrics.read_metrics_rows, as the artifact reads them) as a frame."""
    return pd.DataFrame.from_records(read_metrics_rows(path), columns=TidyRow._fields)


def totals(table: pd.DataFrame) -> pd.DataFrame:
    """metrics.metric_totals of a metrics table (NaN as None), as a frame."""
    rows = table.astype(object).itertuples(index=False)
    tidy = [TidyRow(*(None if v != v else v for v in r)) for r in rows]
    return pd.DataFrame(metric_totals(tidy), columns=MetricTotal._fields)


def cli_table(run: str, files: Sequence[Path]) -> pd.DataFrame:
    """The metrics table through the public path: `cli --run RUN --out CSV FILES`, the CSV read
    back as the artifact reads a run's profile_metrics.csv (read_metrics_csv)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "metrics.csv"
        assert main(["--run", run, "--out", str(out), *map(str, files)]) == 0
        return read_metrics_csv(out)


def assert_independent(table: pd.DataFrame, files: dict[int, Path]) -> None:
    """Each rank's rows of `table` give what corpus_reading's independent reading (stdlib only, no
    analysis/ import) gives for its file: calls, seconds and bytes per metric, each CPU op's calls
    and time, the wall and where it came from, nsys's CUDA activity span, every share."""
    assert set(table["rank"]) == set(files)
    for rank, path in files.items():
        indep = nsys_figures(path) if path.suffix == ".sqlite" else kineto_figures(path)
        mine = table[table["rank"] == rank]
        gpu = mine[~mine["metric"].str.startswith("cpu:")]
        got = gpu.groupby("metric").agg(calls=("calls", "sum"), total_s=("total_s", "sum"),
                                        bytes=("bytes", "sum"))  # fmt: skip
        want = {m: v for m, v in indep["metrics"].items() if v[0]}
        assert set(got.index) == set(want), (path.name, sorted(got.index))
        for metric, (calls, ns, nbytes) in want.items():
            row = got.loc[metric]
            assert (row["calls"], row["bytes"]) == (calls, nbytes), (path.name, metric)
            assert row["total_s"] == pytest.approx(ns / 1e9, rel=1e-9, abs=1e-15), metric
        ops = mine[mine["metric"].str.startswith("cpu:")].set_index("raw_name")
        assert set(ops.index) == set(indep.get("cpu_ops", {})), path.name
        for name, (calls, ns) in indep.get("cpu_ops", {}).items():
            assert ops.loc[name, "calls"] == calls, name
            assert ops.loc[name, "total_s"] == pytest.approx(ns / 1e9, abs=1e-15), name
        lo, hi = indep["wall"]
        assert mine["wall_s"].tolist() == pytest.approx([(hi - lo) / 1e9] * len(mine), abs=1e-15)
        assert all(w.startswith(indep["wall_from"]) for w in mine["wall_from"]), path.name
        shares = (mine["total_s"] / mine["wall_s"]).tolist()
        assert mine["share"].tolist() == pytest.approx(shares, rel=1e-12), path.name
        if "activity" in indep:
            span = (indep["activity"][1] - indep["activity"][0]) / 1e9
            assert mine["activity_s"].tolist() == pytest.approx([span] * len(mine), abs=1e-15)
        assert set(mine["device_kind"]) == {indep.get("device_kind", "CUDA")}, path.name
