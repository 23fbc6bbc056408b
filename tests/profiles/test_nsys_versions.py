"""Exports of three nsys generations (issue 19): CUDA backtraces counted once, batched copies
counted per copy, unified-memory copies as a metric of their own.

Inputs are built by profile_builders.make_nsys with each version's schema (synth.NSYS_SCHEMAS);
their table is checked against the independent reading (corpus_reading.py) and its key numbers
asserted here.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from profile_builders import assert_independent, cli_table, make_nsys, totals

from analysis.profiles.nsys_sqlite import read_nsys_sqlite
from analysis.profiles.synth import MEMCPY_OPER, NSYS_VERSIONS, write_nsys_sqlite

RUNTIME = [
    ("cudaLaunchKernel_v7000", 1_000, 2_000),
    ("cudaLaunchKernel_v7000", 3_000, 5_000),
    ("cudaLaunchKernelExC_v11060", 6_000, 6_500),
    ("cuLaunchKernel", 7_000, 7_300),  # a driver call: event class 1
    ("cudaStreamSynchronize_v3020", 10_000, 20_000),
    ("cudaMemcpyAsync_v3020", 24_000, 28_000),
]
MEMCPY = [  # (copyKind, start, end, bytes, copyCount)
    (1, 30_000, 30_100, 1_000, 1),
    (1, 31_000, 31_400, 8_000, 4),  # one cudaMemcpyBatchAsync record of 4 copies
    (2, 32_000, 32_050, 500, 1),
    (11, 33_000, 33_200, 65_536, 1),  # unified memory: Host-to-Device
    (12, 34_000, 34_100, 4_096, 1),  # unified memory: Device-to-Host
]
KERNELS = [("ncclDevKernel_AllGather_RING_LL", 40_000, 50_000)]
# metric: (calls, total ns) once each call is counted once
EXPECT = {
    "cudaLaunchKernel": (2, 3_000),
    "cudaLaunchKernelExC": (1, 500),
    "cuLaunchKernel": (1, 300),
    "kernel_launch_all": (4, 3_800),
    "cudaStreamSynchronize": (1, 10_000),
    "cudaMemcpyAsync": (1, 4_000),
    "nccl_allgather_ring_ll": (1, 10_000),
    "memcpy_dtoh": (1, 50),
    "memcpy_unified": (2, 300),
}


def build(tmp_path: Path, version: str, **kw) -> Path:
    name = f"v{version}_rank0.sqlite"
    return make_nsys(tmp_path / name, RUNTIME, KERNELS, MEMCPY, version=version, **kw)


@pytest.fixture
def exports(tmp_path: Path) -> dict[str, Path]:
    return {v: build(tmp_path, v, backtraces=True) for v in NSYS_VERSIONS}


def test_inputs_really_hold_backtrace_rows(exports: dict[str, Path]) -> None:
    for version, path in exports.items():
        with sqlite3.connect(path) as con:
            (rows,) = con.execute("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master")}
        assert rows == 2 * len(RUNTIME), version
        assert ("ENUM_NSYS_EVENT_CLASS" in tables) == (version != "2022.4")


def test_an_enum_without_the_backtrace_class_still_counts_each_call_once(
    exports: dict[str, Path],
) -> None:
    """A later nsys that renamed the class: the rows are paired by thread and correlation id."""
    path = exports["2024.4"]
    with sqlite3.connect(path) as con:
        gone = con.execute(
            "DELETE FROM ENUM_NSYS_EVENT_CLASS WHERE name = 'TRACE_PROCESS_EVENT_CUDABACKTRACE'"
        ).rowcount
    assert gone == 1
    got = totals(cli_table("renamed", [path])).set_index("metric")
    for metric, (calls, _) in EXPECT.items():
        assert got.loc[metric, "calls"] == calls, metric


@pytest.mark.parametrize("version", NSYS_VERSIONS)
def test_each_call_counted_once(exports: dict[str, Path], version: str) -> None:
    df = totals(cli_table(version, [exports[version]]))
    got = df.set_index("metric")
    for metric, (calls, total_ns) in EXPECT.items():
        assert got.loc[metric, "calls"] == calls, (version, metric)
        assert got.loc[metric, "total_s"] == pytest.approx(total_ns * 1e-9), (version, metric)
    # the backtrace rows' names (no _v suffix) never reach the table
    raw = set(cli_table(version, [exports[version]])["raw_name"])
    assert "cudaLaunchKernel" not in raw and "cudaLaunchKernel_v7000" in raw


@pytest.mark.parametrize("version", NSYS_VERSIONS)
def test_same_numbers_with_and_without_backtraces(tmp_path: Path, version: str) -> None:
    (tmp_path / "plain").mkdir()
    plain = read_nsys_sqlite(build(tmp_path / "plain", version))
    traced = read_nsys_sqlite(build(tmp_path, version, backtraces=True))
    assert [(r.raw_name, r.calls, r.total_s) for r in traced.rows] == [
        (r.raw_name, r.calls, r.total_s) for r in plain.rows
    ]


def test_batched_copies_count_copies(exports: dict[str, Path]) -> None:
    """copyCount (2025 schema) counts the 4 copies of the batch; older schemas have no such
    column and count records."""
    htod = {}
    for version, path in exports.items():
        rows = [r for r in read_nsys_sqlite(path).rows if r.metric == "memcpy_htod"]
        assert len(rows) == 1 and rows[0].bytes == 9_000 and rows[0].total_s == pytest.approx(5e-7)
        htod[version] = rows[0].calls
    assert htod == {"2022.4": 2, "2024.4": 2, "2025.3": 5}


def test_unified_copies_are_their_own_metric(exports: dict[str, Path]) -> None:
    for version, path in exports.items():
        unified = {r.raw_name: (r.calls, r.bytes) for r in read_nsys_sqlite(path).rows
                   if r.metric == "memcpy_unified"}  # fmt: skip
        # 2022 has no enum table: ids 11 and 12 are read through metrics.CUPTI_COPY_KIND
        assert unified == {
            "CUDA memcpy Unified Host-to-Device": (1, 65_536),
            "CUDA memcpy Unified Device-to-Host": (1, 4_096),
        }, version


def test_unified_short_labels(tmp_path: Path) -> None:
    path = build(tmp_path, "2024.4", short_labels=True)
    metrics = {r.raw_name: r.metric for r in read_nsys_sqlite(path).rows}
    assert metrics["CUDA memcpy UVM HtoD"] == "memcpy_unified"
    assert metrics["CUDA memcpy HtoD"] == "memcpy_htod"


@pytest.mark.parametrize("version", NSYS_VERSIONS)
def test_each_version_as_the_independent_reading(exports: dict[str, Path], version: str) -> None:
    assert_independent(cli_table(version, [exports[version]]), {0: exports[version]})


def test_2022_pairs_only_same_thread_and_correlation_id(tmp_path: Path) -> None:
    """Without the enum, rows pair on (globalTid, correlationId); a missing id (0) never pairs,
    and without an eventClass column the first written row of a pair is kept."""
    path = build(tmp_path, "2022.4", backtraces=True)
    with sqlite3.connect(path) as con:
        # two distinct calls whose correlation id was not recorded
        con.execute(
            "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end, eventClass, globalTid, "
            "correlationId, nameId, returnValue) SELECT 60000, 61000, 0, globalTid, 0, nameId, 0 "
            "FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE correlationId = 5 AND eventClass = 0"
        )
        con.execute("UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET correlationId = 0 WHERE start = 60000")
        con.execute(
            "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end, eventClass, globalTid, "
            "correlationId, nameId, returnValue) SELECT 62000, 63000, 0, globalTid, 0, nameId, 0 "
            "FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE correlationId = 5 AND eventClass = 0"
        )
    calls = {r.metric: r.calls for r in read_nsys_sqlite(path).rows}
    assert calls["cudaStreamSynchronize"] == 3
    with sqlite3.connect(path) as con:
        con.execute("ALTER TABLE CUPTI_ACTIVITY_KIND_RUNTIME DROP COLUMN eventClass")
    rows = {r.raw_name: r.calls for r in read_nsys_sqlite(path).rows}
    assert rows["cudaLaunchKernel_v7000"] == 2 and "cudaLaunchKernel" not in rows


@pytest.mark.parametrize("version", NSYS_VERSIONS)
def test_synthetic_export_of_each_version(tmp_path: Path, version: str) -> None:
    """The benchmark's generator (backtrace rows, a batch, a unified copy) in every schema: the
    reader's calls and times equal what was generated."""
    expected = write_nsys_sqlite(tmp_path / "big.sqlite", 0.3, version=version)
    kind_of = {f"CUDA memcpy {lb}": i for i, _, long, short in MEMCPY_OPER for lb in (long, short)}
    rows = read_nsys_sqlite(tmp_path / "big.sqlite").rows
    assert {r.metric for r in rows} >= {"cudaLaunchKernel", "memcpy_htod", "memcpy_unified"}
    for r in rows:
        key = f"memcpy:{kind_of[r.raw_name]}" if r.raw_name in kind_of else r.raw_name
        calls, total_ns, _ = expected[key]
        assert (r.calls, r.total_s) == (calls, pytest.approx(total_ns * 1e-9)), (version, key)
