"""nsys SQLite reader against hand-built exports with exactly known totals."""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path

import pandas as pd
import pytest
from profile_builders import assert_independent, cli_table, make_nsys, totals

from analysis.profiles.metrics import metric_totals, profile_rows
from analysis.profiles.nsys_sqlite import read_nsys_sqlite, with_capture
from run.node.profiling import CAPTURE_API

RUNTIME = [
    ("cudaLaunchKernel_v7000", 1_000, 2_000),
    ("cudaLaunchKernel_v7000", 3_000, 5_000),
    ("cudaLaunchKernel_v7000", 6_000, 9_000),
    ("cudaLaunchKernel_ptsz_v7000", 9_000, 9_700),
    ("cudaStreamSynchronize_v3020", 10_000, 20_000),
    ("cudaEventSynchronize_v3020", 20_000, 20_500),
    ("cudaEventSynchronize_v3020", 21_000, 22_500),
    ("cudaEventDestroy_v3020", 23_000, 23_100),
    ("cudaMemcpyAsync_v3020", 24_000, 28_000),
    ("cudaMemcpyAsync_v3020", 30_000, 36_000),
    ("cudaMalloc_v3020", 40_000, 90_000),  # not a paper metric: no row
]
KERNELS = [
    ("ncclDevKernel_AllGather_RING_LL", 100_000, 120_000),
    ("ncclDevKernel_AllGather_RING_LL", 130_000, 160_000),
    ("ncclDevKernel_AllGather_RING_LL128", 160_000, 165_000),  # LL128 is not LL
    ("ncclDevKernel_Broadcast_RING_LL", 170_000, 178_000),
    ("ncclDevKernel_Broadcast_RING_SIMPLE", 180_000, 182_000),
    ("ncclKernel_AllReduce_RING_LL_Sum_float", 190_000, 194_000),
    ("sm90_xmma_gemm_bf16bf16_bf16f32", 200_000, 300_000),  # not NCCL: no row
]
MEMCPY = [  # (copyKind, start, end, bytes): every kind nsys knows
    (1, 300_000, 300_100, 1_000),
    (1, 301_000, 301_200, 3_000),
    (2, 302_000, 302_050, 500),
    (8, 303_000, 303_040, 4_096),
    (10, 304_000, 304_030, 8_192),  # peer-to-peer: not a paper metric
    (9, 305_000, 305_010, 16),  # host-to-host: not a paper metric
    (3, 306_000, 306_010, 16),
    (0, 307_000, 307_010, 16),
]


@pytest.fixture
def two_ranks(tmp_path: Path) -> list[Path]:
    """rank0: new labels + ANALYSIS_DETAILS (1 ms); rank1: old labels, wall from activity."""
    r0 = make_nsys(tmp_path / "job_rank0.sqlite", RUNTIME, KERNELS, MEMCPY, details=(0, 1_000_000))
    # rank1: same events, shifted and scaled, with old-style "HtoD" labels.
    r1 = make_nsys(
        tmp_path / "job_rank1.sqlite",
        [(n, 500 + 2 * s, 500 + 2 * e) for n, s, e in RUNTIME],
        [(n, 500 + 2 * s, 500 + 2 * e) for n, s, e in KERNELS],
        [(k, 500 + 2 * s, 500 + 2 * e, b) for k, s, e, b in MEMCPY],
        short_labels=True,
    )
    return [r0, r1]


def test_two_ranks_as_the_independent_reading(two_ranks: list[Path]) -> None:
    table = cli_table("job", two_ranks)
    assert_independent(table, dict(enumerate(two_ranks)))
    # rank1's copies carry the old labels as their raw names
    assert set(table.loc[table["rank"] == 1, "raw_name"]) >= {
        "CUDA memcpy HtoD",
        "CUDA memcpy DtoH",
    }


# rank0's CUDA activity: first runtime call start to last copy end. With no profiling.json and no
# capture settings in the file, nsys's default (the whole session) applies: shares divide by
# ANALYSIS_DETAILS's 1 ms, and the activity span is reported beside it.
ACTIVITY_NS = 307_010 - 1_000
SESSION_NS = 1_000_000


def test_exact_values_rank0(two_ranks: list[Path]) -> None:
    df = totals(cli_table("golden", two_ranks))
    r0 = df[df["rank"] == 0].set_index("metric")
    tidy0 = cli_table("golden", two_ranks[:1])
    assert tidy0["wall_s"].tolist() == pytest.approx([SESSION_NS * 1e-9] * len(tidy0))
    assert tidy0["activity_s"].tolist() == pytest.approx([ACTIVITY_NS * 1e-9] * len(tidy0))
    expect = {  # metric: (calls, total ns, bytes)
        "cudaLaunchKernel": (4, 1_000 + 2_000 + 3_000 + 700, None),
        "kernel_launch_all": (4, 1_000 + 2_000 + 3_000 + 700, None),  # the one launch API
        "cudaStreamSynchronize": (1, 10_000, None),
        "cudaEventSynchronize": (2, 2_000, None),
        "cudaEventDestroy": (1, 100, None),
        "cudaMemcpyAsync": (2, 10_000, None),
        "nccl_allgather_ring_ll": (2, 50_000, None),
        "nccl_broadcast": (2, 10_000, None),
        "nccl_other": (2, 9_000, None),
        "memcpy_htod": (2, 300, 4_000),
        "memcpy_dtoh": (1, 50, 500),
        "memcpy_dtod": (1, 40, 4_096),
    }
    assert set(r0.index) == set(expect)
    for metric, (calls, total_ns, nbytes) in expect.items():
        row = r0.loc[metric]
        assert row["calls"] == calls, metric
        assert math.isclose(row["total_s"], total_ns * 1e-9), metric
        assert math.isclose(row["share"], total_ns / SESSION_NS), metric
        assert pd.isna(row["bytes"]) if nbytes is None else row["bytes"] == nbytes, metric


def test_old_labels_and_activity_wall(two_ranks: list[Path]) -> None:
    prof = read_nsys_sqlite(two_ranks[1])
    # No ANALYSIS_DETAILS: span of all activity, first runtime start to last memcpy end.
    assert prof.wall_from.startswith("CUDA activity span (nsys default: whole session")
    assert set(prof.spans) == {"CUDA activity span"}
    assert prof.wall_s == pytest.approx((2 * 307_010 - 2 * 1_000) * 1e-9)
    raw = {r.raw_name: r for r in prof.rows}
    assert raw["CUDA memcpy HtoD"].metric == "memcpy_htod"
    assert raw["CUDA memcpy HtoD"].bytes == 4_000
    assert raw["CUDA memcpy DtoH"].metric == "memcpy_dtoh"
    assert raw["CUDA memcpy DtoD"].metric == "memcpy_dtod"
    assert raw["cudaLaunchKernel_v7000"].total_s == pytest.approx(2 * 6_000e-9)


def test_without_enum_table_uses_cupti_ids(tmp_path: Path) -> None:
    path = make_nsys(tmp_path / "r.sqlite", RUNTIME[:1], [], MEMCPY[:4])
    with sqlite3.connect(path) as con:
        con.execute("DROP TABLE ENUM_CUDA_MEMCPY_OPER")
    metrics = {r.metric: r.bytes for r in read_nsys_sqlite(path).rows}
    assert metrics == {
        "cudaLaunchKernel": None,
        "memcpy_htod": 4_000,
        "memcpy_dtoh": 500,
        "memcpy_dtod": 4_096,
    }


def test_every_launch_api_from_runtime_table(tmp_path: Path) -> None:
    """nsys keeps runtime and driver calls in CUPTI_ACTIVITY_KIND_RUNTIME, names in StringIds."""
    launches = [
        ("cudaLaunchKernel_v7000", 0, 1_000),
        ("cudaLaunchKernelExC_v11060", 2_000, 4_000),
        ("cudaLaunchKernelExC_v11060", 5_000, 6_000),
        ("cudaLaunchKernelExC_ptsz_v11060", 6_000, 6_500),
        ("cuLaunchKernel", 7_000, 7_300),
        ("cuLaunchKernelEx", 8_000, 8_200),
        ("cudaGraphLaunch_v10000", 9_000, 19_000),
        ("cudaLaunchCooperativeKernel_v9000", 20_000, 21_000),  # not a launch metric: no row
        ("cuModuleLoadData", 21_000, 60_000),  # a driver call that launches nothing: no row
    ]
    path = make_nsys(tmp_path / "r_rank0.sqlite", launches, details=(0, 100_000))
    raw = {r.raw_name: r.metric for r in read_nsys_sqlite(path).rows}
    assert raw == {
        "cudaLaunchKernel_v7000": "cudaLaunchKernel",
        "cudaLaunchKernelExC_v11060": "cudaLaunchKernelExC",
        "cudaLaunchKernelExC_ptsz_v11060": "cudaLaunchKernelExC",
        "cuLaunchKernel": "cuLaunchKernel",
        "cuLaunchKernelEx": "cuLaunchKernelEx",
        "cudaGraphLaunch_v10000": "cudaGraphLaunch",
    }
    m = totals(cli_table("r", [path])).set_index("metric")
    assert m.loc["cudaLaunchKernel", "calls"] == 1  # the paper's metric: only cudaLaunchKernel
    assert m.loc["cudaLaunchKernelExC", "calls"] == 3
    assert m.loc["cudaLaunchKernelExC", "total_s"] == pytest.approx(3_500e-9)
    assert m.loc["kernel_launch_all", "calls"] == 1 + 3 + 1 + 1 + 1
    assert m.loc["kernel_launch_all", "total_s"] == pytest.approx(15_000e-9)
    # cudaProfilerApi: the share of the CUDA activity (0..60 us), not of the 100 us session
    prof = with_capture(read_nsys_sqlite(path), CAPTURE_API)
    assert prof.wall_s == pytest.approx(60e-6)
    by_name = {t.metric: t for t in metric_totals(profile_rows("r", 0, prof))}
    assert by_name["kernel_launch_all"].share == pytest.approx(15_000 / 60_000)
