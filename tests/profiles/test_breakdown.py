"""Time breakdown by interval union: hand cases, bounded memory, nsys and Kineto agree exactly."""

from __future__ import annotations

import dataclasses
import json
import random
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from profile_builders import add_capture_settings, add_memsets, kineto_event, make_nsys, write_trace

from analysis.profiles import breakdown as bd
from analysis.profiles import breakdown_nsys, read_profile_breakdown
from analysis.profiles.cli import main
from analysis.profiles.intervals import SortedUnion, Unsorted
from analysis.profiles.nsys_sqlite import NSYS_DEFAULT, read_nsys_sqlite, with_capture
from analysis.profiles.synth import NSYS_SCHEMAS


@pytest.mark.parametrize(
    ("intervals", "merged"),
    [
        ([], []),
        ([(0, 10)], [(0, 10)]),
        ([(0, 10), (5, 15)], [(0, 15)]),  # overlap
        ([(0, 10), (2, 3), (4, 9)], [(0, 10)]),  # nested
        ([(0, 5), (5, 10)], [(0, 10)]),  # touching
        ([(0, 5), (6, 10)], [(0, 5), (6, 10)]),  # a gap of 1 ns stays
        ([(3, 3), (4, 2), (5, 7)], [(5, 7)]),  # empty and reversed records count nothing
        ([(0, 4), (0, 9), (1, 2)], [(0, 9)]),  # same start, longer second
    ],
)
def test_union_hand_cases(intervals: list, merged: list) -> None:
    union = SortedUnion()
    union.add(*np.array(intervals, dtype=np.int64).reshape(-1, 2).T)
    assert union.total == sum(e - s for s, e in merged)


def test_blocking_names_both_spellings() -> None:
    assert bd.is_blocking("cudaStreamSynchronize_v3020") and bd.is_blocking("cudaMemcpy")
    assert bd.is_blocking("cudaMemcpy_ptds_v7000") and bd.is_blocking("cuCtxSynchronize")
    assert not bd.is_blocking("cudaMemcpyAsync_v3020") and not bd.is_blocking("cudaLaunchKernel")


def test_breakdown_path() -> None:
    assert bd.breakdown_path("r/metrics.csv") == Path("r/metrics.breakdown.csv")
    assert bd.breakdown_path("r/profile_metrics.csv") == Path("r/profile_breakdown.csv")


# One job: (API, start ns, end ns) on the host; (kernel, start, end, device) on the GPUs.
HOST_CALLS = [
    ("cudaLaunchKernel", 1_000_000, 1_005_000),
    ("cudaStreamSynchronize", 1_300_000, 1_700_123),
    ("cudaEventSynchronize", 1_650_000, 1_800_000),  # overlaps the one above: counted once
    ("cudaMemcpyAsync", 2_000_000, 2_020_000),  # does not block
    ("cudaMemcpy", 2_100_000, 2_130_457),  # synchronous copy: blocks
    ("cudaDeviceSynchronize", 9_000_000, 9_500_000),
]
ALLGATHER = "ncclDevKernel_AllGather_RING_LL"
KERNELS = [
    (ALLGATHER, 3_000_000, 3_250_000, 0),
    ("gemm_kernel", 3_100_000, 3_200_000, 0),  # inside the AllGather
    ("gemm_kernel", 3_240_000, 3_400_000, 0),  # over its end
    ("ncclDevKernel_Broadcast_RING_LL", 5_000_000, 5_080_000, 0),  # alone
    ("elementwise_kernel", 5_080_000, 5_100_321, 0),  # touches the Broadcast
    ("gemm_kernel", 4_000_000, 4_500_000, 1),
    (ALLGATHER, 4_400_000, 4_600_000, 1),
]
COPIES = [(1, 8_000_000, 8_012_000, 602112), (2, 8_005_000, 8_010_000, 4)]
MEMSETS = [(8_400_000, 8_401_000)]
EXPECTED = {
    0: bd.DeviceTimes(busy=513_321, compute=280_321, comm=330_000, comm_not_overlapped=220_000),
    1: bd.DeviceTimes(busy=600_000, compute=500_000, comm=200_000, comm_not_overlapped=100_000),
}


def _job_nsys(path: Path, backtraces: bool = False) -> Path:
    suffix = {"cudaLaunchKernel": "_v7000"}
    runtime = [(n + suffix.get(n, "_v3020"), s, e) for n, s, e in HOST_CALLS]
    make_nsys(path, runtime, [k[:3] for k in KERNELS], COPIES, backtraces=backtraces)
    add_memsets(path, MEMSETS)
    with sqlite3.connect(path) as con:
        con.execute("UPDATE CUPTI_ACTIVITY_KIND_MEMSET SET deviceId = 0")
        for _, start, _, device in KERNELS:
            con.execute(
                "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET deviceId = ? WHERE start = ?",
                (device, start),
            )
    con.close()
    return path


def _job_kineto(path: Path) -> Path:
    def us(start: int, end: int) -> tuple[float, float]:
        return start / 1000, (end - start) / 1000

    def kernel_name(n: str) -> str:
        return f"{n}(ncclDevComm*, unsigned long, ncclWork*)" if "nccl" in n else f"void {n}<4>()"

    gpu = [kineto_event("kernel", kernel_name(n), *us(s, e), device=d) for n, s, e, d in KERNELS]
    gpu += [kineto_event("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", *us(s, e), device=0,
                         bytes=b) for _, s, e, b in COPIES]  # fmt: skip
    gpu += [kineto_event("gpu_memset", "Memset (Device)", *us(s, e), device=0) for s, e in MEMSETS]
    random.Random(7).shuffle(gpu)  # Kineto does not write events in time order
    host = [kineto_event("cuda_runtime", n, *us(s, e)) for n, s, e in HOST_CALLS]
    around = [kineto_event("cpu_op", "aten::mm", 500.0, 9500.0)]  # outside the CUDA span
    return write_trace(path, around + gpu + host)


def test_nsys_and_kineto_agree_to_the_nanosecond(tmp_path: Path) -> None:
    from_nsys = read_profile_breakdown(_job_nsys(tmp_path / "rank0.sqlite"))[1]
    from_kineto = read_profile_breakdown(_job_kineto(tmp_path / "rank0.pt.trace.json"))[1]
    assert from_nsys.devices == from_kineto.devices == EXPECTED
    assert from_nsys.activity == from_kineto.activity == (1_000_000, 9_500_000)
    assert from_nsys.host_blocked == from_kineto.host_blocked == 500_000 + 30_457 + 500_000
    # Each over the wall its metrics divide by: the export has no session, so its CUDA activity;
    # the trace's span includes the CPU op around the CUDA work.
    assert from_nsys.window == (1_000_000, 9_500_000)
    assert from_kineto.window == (500_000, 10_000_000) and from_kineto.window_from == "trace span"
    # Over one window, the two rows agree exactly.
    same = [dataclasses.replace(b, window=b.activity) for b in (from_nsys, from_kineto)]
    rows = [[r[:2] + r[3:] for r in bd.breakdown_rows("j", 0, b)] for b in same]  # less source
    assert rows[0] == rows[1]
    # backtrace rows (nsys --cudabacktrace) are not calls of their own
    again = read_profile_breakdown(_job_nsys(tmp_path / "bt.sqlite", backtraces=True))[1]
    assert again == from_nsys


def test_cli_writes_and_prints_the_breakdown(tmp_path: Path, capsys) -> None:
    a = _job_nsys(tmp_path / "rank0.sqlite")
    b = _job_kineto(tmp_path / "rank1.pt.trace.json")
    out = tmp_path / "metrics.csv"
    assert main(["--run", "j", "--out", str(out), str(a), str(b)]) == 0
    table = pd.read_csv(tmp_path / "metrics.breakdown.csv", dtype={"device": str})
    assert list(table.columns) == bd.COLUMNS
    assert set(table["quantity"]) == set(bd.QUANTITIES)
    idle = table[(table["quantity"] == "idle") & (table["device"] == "1")]
    # each rank's idle is over the wall its shares divide by: the nsys export's CUDA activity
    # (it records no session), the trace's span (the CPU op around the CUDA work)
    assert idle["seconds"].tolist() == [(8_500_000 - 600_000) / 1e9, (9_500_000 - 600_000) / 1e9]
    text = capsys.readouterr().out
    assert "breakdown rank 0 (nsys): window 0.0085 s (CUDA activity span (nsys default" in text
    assert (
        "breakdown rank 1 (torch): window 0.0095 s (trace span), CUDA activity 0.0085 s\n" in text
    )
    assert (
        "  device 1 (2 kernels, 0 copies, 0 memsets): busy 0.0006 s (7.1%), idle 0.0079 s" in text
    )
    assert "  host blocked in CUDA calls: 0.00103 s (12.1%)" in text
    assert not list(tmp_path.glob(".*tmp"))


@pytest.mark.parametrize("version", sorted(NSYS_SCHEMAS))
def test_every_covered_nsys_layout(tmp_path: Path, version: str) -> None:
    runtime = [("cudaStreamSynchronize_v3020", 0, 400), ("cudaLaunchKernel_v7000", 500, 510)]
    path = make_nsys(tmp_path / "r.sqlite", runtime, [(ALLGATHER, 100, 300)], [(1, 250, 600, 8)],
                     version=version)  # fmt: skip
    out = read_profile_breakdown(path)[1]
    assert out.window == (0, 600) and out.host_blocked == 400
    assert out.devices == {
        0: bd.DeviceTimes(busy=500, compute=0, comm=200, comm_not_overlapped=200)
    }


def test_numpy_unions_match_the_streamed_one() -> None:
    """SortedUnion (chunks) against the covered nanoseconds counted one by one."""
    rng = random.Random(3)
    for _ in range(200):
        n = rng.randrange(0, 40)
        pairs = [
            (s, s + rng.choice((0, 1, 2, 5, 30))) for s in (rng.randrange(0, 100) for _ in range(n))
        ]
        want = len({t for s, e in pairs for t in range(s, e)})
        ordered = np.array(sorted(pairs), dtype=np.int64).reshape(-1, 2)
        acc = SortedUnion()
        for lo in range(0, len(ordered), 7):
            acc.add(ordered[lo : lo + 7, 0], ordered[lo : lo + 7, 1])
        assert acc.total == want
    with pytest.raises(Unsorted):
        SortedUnion().add(np.array([5, 1]), np.array([6, 2]))


def test_nsys_tables_out_of_time_order(tmp_path: Path) -> None:
    """An export whose rows are not stored by start is read again sorted: same numbers."""
    path = _job_nsys(tmp_path / "rank0.sqlite")
    with sqlite3.connect(path) as con:
        for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME"):
            con.execute(f"CREATE TABLE t AS SELECT * FROM {table} ORDER BY start DESC")
            con.execute(f"DELETE FROM {table}")
            con.execute(f"INSERT INTO {table} SELECT * FROM t")
            con.execute("DROP TABLE t")
    con.close()
    prof, out = bd.read_nsys(path)
    assert out.devices == EXPECTED and out.host_blocked == 500_000 + 30_457 + 500_000
    assert prof == read_nsys_sqlite(path)  # the kernel metrics counted from the sorted rows


@pytest.mark.parametrize("rows", [1, 2, 3, 4])
def test_nsys_read_in_windows_of_few_rows(tmp_path: Path, monkeypatch, rows: int) -> None:
    """The GPU tables read a few rowids at a time: windows of one device (its column never
    written) and windows where a second one shows (written from there on) give the same
    numbers, all from the stored order."""
    path = _job_nsys(tmp_path / "rank0.sqlite")
    with sqlite3.connect(path) as con:  # kernels stored by start: devices 0, 0, 0, 1, 1, 0, 0
        con.execute("CREATE TABLE t AS SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY start")
        con.execute("DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL")
        con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT * FROM t")
        con.execute("DROP TABLE t")
    con.close()
    monkeypatch.setattr(breakdown_nsys, "_ROWS", rows)
    monkeypatch.setattr(breakdown_nsys, "_chunks", None)  # never read again sorted
    prof, out = bd.read_nsys(path)
    assert out.devices == EXPECTED and out.host_blocked == 500_000 + 30_457 + 500_000
    assert prof == read_nsys_sqlite(path)


@pytest.mark.parametrize("version", sorted(NSYS_SCHEMAS))
def test_metrics_from_the_breakdown_scan(tmp_path: Path, version: str) -> None:
    """The one pass counts the kernel and copy metrics from the rows its unions read, as the
    GROUP BYs of the reader alone; a row with no end (never read as a number) leaves a table to
    its GROUP BY, and NULL names, kinds and bytes group as there."""
    copies = [(1, 100, 200, 8, 4), (8, 150, 400, 16, 1), (1, 500, 600, 32, 0), (11, 700, 800, 8)]
    calls = [("cudaLaunchKernel_v7000", 0, 10), ("cudaStreamSynchronize_v3020", 5, 50),
             ("cudaLaunchKernel_v7000", 60, 70), ("cuCtxSynchronize", 65, 90)]  # fmt: skip
    path = make_nsys(tmp_path / "r.sqlite", calls,
                     [k[:3] for k in sorted(KERNELS, key=lambda k: k[1])], copies,
                     version=version, backtraces=True)  # fmt: skip
    prof, split = bd.read_nsys(path)
    assert prof == read_nsys_sqlite(path) and split.host_blocked == 45 + 25
    with sqlite3.connect(path) as con:  # the tables without their NOT NULL constraints
        for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
                      "CUPTI_ACTIVITY_KIND_RUNTIME"):  # fmt: skip
            con.execute(f"CREATE TABLE t AS SELECT * FROM {table}")
            con.execute(f"DROP TABLE {table}")
            con.execute(f"ALTER TABLE t RENAME TO {table}")
        con.execute("UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET copyKind = NULL WHERE rowid = 2")
        con.execute('UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET "bytes" = NULL WHERE rowid = 3')
        con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET shortName = NULL WHERE rowid = 2")
        con.execute("UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET nameId = NULL WHERE start = 65")
    con.close()
    assert bd.read_nsys(path)[0] == read_nsys_sqlite(path)
    with sqlite3.connect(path) as con:
        for table in ("KERNEL", "MEMCPY"):
            con.execute(f'UPDATE CUPTI_ACTIVITY_KIND_{table} SET "end" = NULL WHERE rowid = 1')
        # a launch (its name has another call: a name with no end at all fails either way)
        con.execute('UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET "end" = NULL WHERE start = 0')
    con.close()
    assert bd.read_nsys(path)[0] == read_nsys_sqlite(path)


@pytest.mark.parametrize(
    ("settings", "plan", "window", "why"),
    [
        (None, None, (0, 10_000_000), "ANALYSIS_DETAILS session"),
        ({"START_TRIGGER": "cudaProfilerApi"}, None, (1_000_000, 9_500_000), "CUDA activity"),
        ({"START_TRIGGER": "cudaProfilerApi"}, "duration", (0, 10_000_000), "ANALYSIS_DETAILS"),
    ],
)
def test_window_is_the_metrics_wall(tmp_path: Path, settings, plan, window, why) -> None:
    """The breakdown divides by the wall the share column divides by, whichever chose it."""
    path = _job_nsys(tmp_path / "rank0.sqlite")
    with sqlite3.connect(path) as con:
        con.execute("INSERT INTO ANALYSIS_DETAILS VALUES (0, 10000000, 0, 10000000)")
    con.close()
    if settings:
        add_capture_settings(path, settings)
    prof, split = bd.read_nsys(path, plan)
    assert split.window == window and split.window_from == prof.wall_from
    assert split.window_from.startswith(why) and split.window_ns / 1e9 == pytest.approx(prof.wall_s)
    assert split.activity == (1_000_000, 9_500_000) and split.devices == EXPECTED
    # collect re-chooses the wall after reading (profiling.json): the window follows it
    again = bd.for_wall(split, with_capture(prof, "cudaProfilerApi"))
    assert again.window == (1_000_000, 9_500_000)


@pytest.mark.parametrize("shuffled", [False, True])
def test_kineto_folds_in_windows_or_reads_again(tmp_path: Path, monkeypatch, shuffled) -> None:
    """Folded a few events at a time (breakdown_kineto): in time order the held-back half keeps
    it exact; shuffled beyond the window, the trace is read again keeping every interval."""
    from analysis.profiles import breakdown_kineto

    monkeypatch.setattr(breakdown_kineto, "FLUSH_EVENTS", 3)
    path = _job_kineto(tmp_path / "rank0.pt.trace.json")
    if not shuffled:  # the same events in time order
        doc = json.loads(path.read_text())
        doc["traceEvents"].sort(key=lambda ev: ev["ts"])
        path.write_text(json.dumps(doc))
    reads = []
    real = bd.read_torch_trace

    def counted(path, cpu_ops, feed_for, *events):
        return real(path, cpu_ops, lambda keep_all: reads.append(keep_all) or feed_for(keep_all),
                    *events)  # fmt: skip

    monkeypatch.setattr(bd, "read_torch_trace", counted)
    out = read_profile_breakdown(path)[1]
    assert out.devices == EXPECTED and out.host_blocked == 500_000 + 30_457 + 500_000
    assert out.activity == (1_000_000, 9_500_000)
    assert reads == ([False, True] if shuffled else [False])


@pytest.mark.parametrize(
    ("session", "window", "note"),
    [
        # the session starts after the first records (some exports): widened, the records named
        (
            (2_500_000, 10_000_000),
            (1_000_000, 10_000_000),
            ", widened by 0.0015 s to the CUDA activity span to hold the CUDA records (5 calls)"
            " outside the session",
        ),
        # on another clock (a Windows export): no record inside, the length placed at the first
        (
            (33_000_000_000, 33_010_000_000),
            (1_000_000, 11_000_000),
            ", on another clock than its CUDA records (7 kernels, 6 calls, 2 copies, 1 memset):"
            " none inside [33.000, 33.010] s, so its length is placed at the first record",
        ),
        # inside: as recorded
        ((0, 10_000_000), (0, 10_000_000), ""),
    ],
)
def test_records_outside_the_session(tmp_path: Path, capsys, session, window, note) -> None:
    """Issue 37: the wall holds every record, counted and named on the summary line; the
    breakdown divides by that wall, and no union exceeds it."""
    path = _job_nsys(tmp_path / "rank0.sqlite")
    lo, hi = session
    with sqlite3.connect(path) as con:
        con.execute("INSERT INTO ANALYSIS_DETAILS VALUES (0, ?, ?, ?)", (hi - lo, lo, hi))
    con.close()
    prof, split = bd.read_nsys(path)
    why = f"ANALYSIS_DETAILS session ({NSYS_DEFAULT}){note}"
    assert prof.wall_from == why and split.window_from == why
    assert split.window == window and prof.wall_s == (window[1] - window[0]) / 1e9
    assert split.devices == EXPECTED  # nothing dropped, nothing counted twice
    assert all(t.busy <= split.window_ns for t in split.devices.values())
    assert split.counts[0] == bd.DeviceCounts(kernels=5, copies=2, memsets=1)
    assert main(["--run", "j", "--out", str(tmp_path / "m.csv"), str(path)]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert f"wall {prof.wall_s:.3f} s ({why}), CUDA activity 0.009 s" in first
