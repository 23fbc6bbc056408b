"""What kind of device a Kineto trace's GPU events come from: CUDA, HIP/ROCm (a ROCm build writes
its HIP calls under cuda_runtime), none (a CPU-only trace), or a kind this reader does not know
(an MTIA build's mtia_runtime and mtia_ccp_events), refused rather than read as CPU-only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .kineto_fold import GPU_WORK_CATS, KIND_BY_CAT, OTHER_CATS
from .metrics import ProfileError

CUDA, HIP = "CUDA", "HIP/ROCm"  # RankProfile.device_kind
# The HIP calls that are the paper's (and the other launch) metrics on a ROCm build: each is a
# metric of its own, named as HIP names it, beside the CUDA call it stands for.
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
    """Nothing ("") where every GPU-like category is one this reader knows; a warning line where
    some are not but others are; a ProfileError where all the trace's GPU events are of those."""
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
    """HIP where the trace says it came from a ROCm build (its keys, its hip* calls), CUDA where
    it holds GPU work or CUDA calls, else "" (a CPU-only trace)."""
    calls = [raw for kind, raw in acc if kind == "runtime"]
    if any(k in meta for k in _ROCM_KEYS) or any(str(c).startswith("hip") for c in calls):
        return HIP
    return CUDA if calls or any(c in GPU_WORK_CATS for c in cats) else ""


def hip_metric(raw: str) -> str | None:
    """The HIP metric of a HIP call's name (HIP_METRICS), None for a call no metric reads."""
    name = raw.strip()
    return name if name in HIP_METRICS else None
