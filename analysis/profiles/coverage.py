"""What an absent metric means, in one place (the artifacts, the CLI and the figures import it):

    not profiled      PROFILER=none: nothing recorded (NOT_PROFILED)
    CPU run           no GPU, so no CUDA metric (NOT_MEASURED, never 0)
    not recordable    the profiler never writes it, GPU or not (UNRECORDABLE, `not_recorded`)
    not called        a GPU profile with CUDA activity but not this metric: 0 (NOT_CALLED)
    no CUDA activity  a GPU profile with no CUDA row: a 0 would be a guess (NO_CUDA_IN_PROFILE)

The profiler is a profile's tidy `source` ("nsys" or "torch"); a run used a GPU unless its
summary's `device` is "cpu".
"""

from __future__ import annotations

from collections.abc import Iterable

from .metrics import CPU_PREFIX

NOT_MEASURED = "not measured on this hardware"
NOT_PROFILED = "not profiled (PROFILER=none)"
NOT_CALLED = "not called in the profiled window (0)"
NO_CUDA_IN_PROFILE = "no CUDA activity in this run's profile"
# Profile source -> the profiler's name as the notes spell it.
PROFILER_NAMES: dict[str, str] = {"nsys": "Nsight Systems", "torch": "torch.profiler"}
# Profile source -> metrics it never records. Kineto filters cudaEventCreate/cudaEventDestroy/
# cudaGetDevice... out of its CUPTI runtime records to keep traces small
# (CuptiActivityProfiler::isBlockListedRuntimeCbid); nsys records every call.
UNRECORDABLE: dict[str, frozenset[str]] = {
    "nsys": frozenset(),
    "torch": frozenset({"cudaEventDestroy"}),
}
# Why, for the claims' evidence: what a reader can do to get the number.
UNRECORDABLE_WHY: dict[str, str] = {
    "torch": "Kineto leaves it out of its traces; PROFILER=nsys records it",
}


def not_recorded(source: str) -> str:
    """The note for a metric that the profiler of `source` cannot record."""
    return f"not recorded by {PROFILER_NAMES.get(source, source)}"


def unrecordable(sources: Iterable[str]) -> frozenset[str]:
    """Metrics that none of the profilers in `sources` can record (empty for no source)."""
    sets = [UNRECORDABLE.get(s, frozenset()) for s in sources]
    return frozenset.intersection(*sets) if sets else frozenset()


def is_cpu_device(device: object) -> bool | None:
    """True for a run summary's device "cpu", False for a GPU name or "cuda", None if unknown."""
    if not isinstance(device, str) or not device.strip():
        return None
    return device.strip().lower() == "cpu"


def has_cuda(metrics: Iterable[str]) -> bool:
    """Whether any of these metric names is a CUDA one (not a "cpu:" op)."""
    return any(not m.startswith(CPU_PREFIX) for m in metrics)


def why(note: str) -> str:
    """A short reason to append to a claim's evidence for one absence note ('' if none)."""
    if note == NOT_MEASURED:
        return "no CUDA in the profile"
    for source, text in UNRECORDABLE_WHY.items():
        if note == not_recorded(source):
            return text
    return ""
