"""Name normalisation, the derived all-API launch count and rank assignment."""

from __future__ import annotations

from pathlib import Path

import pytest
from profile_builders import make_nsys

from analysis.profiles import load, rank_from_path
from analysis.profiles.metrics import (
    DERIVED_METRICS,
    KERNEL_LAUNCH_ALL,
    LABELS,
    LAUNCH_APIS,
    LAUNCH_METRICS,
    METRICS,
    RUNTIME_METRICS,
    TidyRow,
    memcpy_metric,
    metric_totals,
    nccl_metric,
    runtime_metric,
)


@pytest.mark.parametrize(
    ("raw", "metric"),
    [
        ("cudaLaunchKernel_v7000", "cudaLaunchKernel"),
        ("cudaLaunchKernel", "cudaLaunchKernel"),
        ("cudaLaunchKernel_ptsz_v7000", "cudaLaunchKernel"),
        ("cudaStreamSynchronize_v3020", "cudaStreamSynchronize"),
        ("cudaEventSynchronize_v3020", "cudaEventSynchronize"),
        ("cudaEventDestroy_v3020", "cudaEventDestroy"),
        ("cudaMemcpyAsync_ptsz_v7000", "cudaMemcpyAsync"),
        ("cudaMalloc_v3020", None),
        # the other launch APIs: metrics of their own, suffixes as nsys and kineto spell them
        ("cudaLaunchKernelExC_v11060", "cudaLaunchKernelExC"),
        ("cudaLaunchKernelExC_ptsz_v11060", "cudaLaunchKernelExC"),
        ("cudaLaunchKernelExC", "cudaLaunchKernelExC"),
        ("cuLaunchKernel", "cuLaunchKernel"),
        ("cuLaunchKernel_ptsz", "cuLaunchKernel"),
        ("cuLaunchKernelEx", "cuLaunchKernelEx"),
        ("cuLaunchKernelEx_ptsz", "cuLaunchKernelEx"),
        ("cudaGraphLaunch_v10000", "cudaGraphLaunch"),
        ("cudaGraphLaunch_ptsz_v10000", "cudaGraphLaunch"),
        ("cudaLaunchCooperativeKernel_v9000", None),  # not in the list of launch APIs
        ("cuLaunchKernelExtra", None),  # a prefix is not a match
        ("cuGraphLaunch", None),
    ],
)
def test_runtime_metric(raw: str, metric: str | None) -> None:
    assert runtime_metric(raw) == metric


@pytest.mark.parametrize(
    ("label", "metric"),
    [
        ("HtoD", "memcpy_htod"),
        ("Host-to-Device", "memcpy_htod"),
        ("CUDA memcpy Host-to-Device", "memcpy_htod"),
        ("[CUDA memcpy HtoD]", "memcpy_htod"),
        ("Memcpy HtoD (Pinned -> Device)", "memcpy_htod"),
        ("DtoH", "memcpy_dtoh"),
        ("Device-to-Host", "memcpy_dtoh"),
        ("Memcpy DtoH (Device -> Pageable)", "memcpy_dtoh"),
        ("DtoD", "memcpy_dtod"),
        ("Device-to-Device", "memcpy_dtod"),
        ("Peer-to-Peer", None),
        ("PtoP", None),
        ("Host-to-Host", None),
    ],
)
def test_memcpy_metric(label: str, metric: str | None) -> None:
    assert memcpy_metric(label) == metric


@pytest.mark.parametrize(
    ("name", "metric"),
    [
        ("ncclDevKernel_AllGather_RING_LL", "nccl_allgather_ring_ll"),
        ("ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
         "nccl_allgather_ring_ll"),
        ("ncclKernel_AllGather_RING_LL_Sum_int8_t", "nccl_allgather_ring_ll"),
        ("ncclDevKernel_AllGather_RING_LL128", "nccl_other"),
        ("ncclDevKernel_AllGather_RING_SIMPLE", "nccl_other"),
        ("ncclDevKernel_Broadcast_RING_LL", "nccl_broadcast"),
        ("ncclDevKernel_Broadcast_RING_SIMPLE(ncclDevComm*, unsigned long, ncclWork*)",
         "nccl_broadcast"),
        ("ncclDevKernel_ReduceScatter_RING_LL", "nccl_other"),
        ("ncclDevKernel_Generic", "nccl_other"),
        ("void ncclDevKernel_SendRecv<0>(ncclDevComm*)", "nccl_other"),
        ("sm90_xmma_gemm_bf16bf16_bf16f32", None),
        ("void at::native::elementwise_kernel<128, 4>(int)", None),
    ],
)  # fmt: skip
def test_nccl_metric(name: str, metric: str | None) -> None:
    assert nccl_metric(name) == metric


def test_metric_names_cover_paper_table() -> None:
    assert set(METRICS) >= {
        "cudaLaunchKernel", "cudaStreamSynchronize", "cudaEventSynchronize", "cudaEventDestroy",
        "cudaMemcpyAsync", "memcpy_htod", "memcpy_dtoh", "memcpy_dtod",
        "nccl_allgather_ring_ll", "nccl_broadcast", "nccl_other",
    }  # fmt: skip


@pytest.mark.parametrize(
    ("path", "rank"),
    [
        ("out/report_rank3.sqlite", 3),
        ("out/rank_12/trace.json", 12),
        ("out/Rank-2.pt.trace.json.gz", 2),
        ("out/r0-2025-1-2-3-4.123.pt.trace.json.gz", None),  # torchtune's names carry no rank
        ("out/profile.sqlite", None),
        ("out/framework_rank1/iteration_5/host.1.pt.trace.json", 1),
    ],
)
def test_rank_from_path(path: str, rank: int | None) -> None:
    assert rank_from_path(path) == rank


def test_ranks_by_name_then_order(tmp_path: Path) -> None:
    rt = [("cudaLaunchKernel_v7000", 0, 10)]
    named = make_nsys(tmp_path / "x_rank1.sqlite", rt)
    plain_a = make_nsys(tmp_path / "a.sqlite", rt)
    plain_b = make_nsys(tmp_path / "b.sqlite", rt)
    ranks = [r for r, *_ in load([plain_a, named, plain_b])]
    assert ranks == [0, 1, 2]


def test_one_list_of_launch_apis() -> None:
    assert LAUNCH_APIS == ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel",
                           "cuLaunchKernelEx", "cudaGraphLaunch")  # fmt: skip
    assert set(LAUNCH_APIS) <= RUNTIME_METRICS
    # the paper's metric stays the paper's; the others are metrics of their own, not the paper's
    assert "cudaLaunchKernel" in METRICS and set(LAUNCH_METRICS) == set(LAUNCH_APIS[1:])
    assert not set(LAUNCH_METRICS) & set(METRICS) and KERNEL_LAUNCH_ALL not in METRICS
    assert (
        LABELS[KERNEL_LAUNCH_ALL]
        == DERIVED_METRICS[KERNEL_LAUNCH_ALL]
        == (
            "kernel launches, all APIs (cudaLaunchKernel, cudaLaunchKernelExC, cuLaunchKernel, "
            "cuLaunchKernelEx, cudaGraphLaunch)"
        )
    )


def _tidy(rows: list[tuple]) -> list[TidyRow]:
    """rows: (run, rank, source, metric, raw name, calls, total_s, share)."""
    return [TidyRow(*r[:7], None, r[7]) for r in rows]


def test_kernel_launch_all_sums_each_launch_once() -> None:
    rows = _tidy([
        # two raw spellings of cudaLaunchKernel: one metric, counted once each
        ("a", 0, "nsys", "cudaLaunchKernel", "cudaLaunchKernel_v7000", 10, 1.0, 0.10),
        ("a", 0, "nsys", "cudaLaunchKernel", "cudaLaunchKernel_ptsz_v7000", 2, 0.5, 0.05),
        ("a", 0, "nsys", "cudaLaunchKernelExC", "cudaLaunchKernelExC_v11060", 5, 0.25, 0.025),
        ("a", 0, "nsys", "cuLaunchKernel", "cuLaunchKernel", 3, 0.125, 0.0125),
        ("a", 0, "nsys", "cudaGraphLaunch", "cudaGraphLaunch_v10000", 1, 2.0, 0.2),
        ("a", 0, "nsys", "cudaStreamSynchronize", "cudaStreamSynchronize_v3020", 7, 9.0, 0.9),
        ("a", 1, "nsys", "cuLaunchKernelEx", "cuLaunchKernelEx", 4, 0.5, 0.04),
        ("a", 1, "torch", "cudaLaunchKernel", "cudaLaunchKernel", 6, 0.3, 0.03),
        ("b", 0, "nsys", "cudaMemcpyAsync", "cudaMemcpyAsync_v3020", 1, 1.0, 0.1),  # no launch
    ])  # fmt: skip
    out = metric_totals(rows)
    got = {t[:3]: t for t in out if t.metric == KERNEL_LAUNCH_ALL}
    assert list(got) == [("a", 0, "nsys"), ("a", 1, "nsys"), ("a", 1, "torch")]
    assert got[("a", 0, "nsys")].calls == 10 + 2 + 5 + 3 + 1  # not the 7 syncs
    assert got[("a", 0, "nsys")].total_s == pytest.approx(1.0 + 0.5 + 0.25 + 0.125 + 2.0)
    assert got[("a", 0, "nsys")].share == pytest.approx(0.3875)
    assert got[("a", 1, "nsys")].calls == 4 and got[("a", 1, "torch")].calls == 6
    assert all(t.bytes is None for t in got.values())
    # one row per metric, and run b (no launch at all) gets no derived row
    assert len(out) == len({r[:4] for r in rows}) + 3
    assert not any(t.run == "b" and t.metric == KERNEL_LAUNCH_ALL for t in out)
    # a table that already holds the derived row: counted nothing twice
    again = [TidyRow(*t[:4], t.metric, t.calls, t.total_s, t.bytes, t.share) for t in out]
    assert metric_totals(again) == out


def test_kernel_launch_all_of_an_empty_table() -> None:
    assert metric_totals([]) == []
