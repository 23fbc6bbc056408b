"""Name normalisation and rank assignment."""

from __future__ import annotations

from pathlib import Path

import pytest
from profile_builders import make_nsys

from analysis.profiles import load_profiles, rank_from_path
from analysis.profiles.metrics import METRICS, memcpy_metric, nccl_metric, runtime_metric


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
        ("cuLaunchKernel", None),
        ("cudaLaunchKernelExC_v11060", None),
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
    ranks = [r for r, _ in load_profiles([plain_a, named, plain_b])]
    assert ranks == [0, 1, 2]
