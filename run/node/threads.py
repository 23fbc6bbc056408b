"""The CPU share of one rank: without a GPU each gloo rank stands in for one GPU, so each gets the
same fixed share of the machine at every rank count, whatever else is running.

One compute thread per rank (torch's intra-op and inter-op pools, and OpenMP): n ranks then have
n times one rank's compute, as n GPUs do. Sharing the cores instead (a 1-rank run taking both
cores, a 2-rank run one each) made 1-rank runs collapse under load (a quarter-width MobileNetV2
step at 24-53 img/s with 2 threads against 185-208 img/s with 1 on a loaded 2-core machine), and
every speed-up measured the machine's load rather than the ranks. Data-loading workers are
processes of their own; they are counted beside the compute thread in the record.

CPU_THREADS_PER_RANK (environment, default 1) changes the share for every workload.
"""

from __future__ import annotations

import os
from typing import Any

from run import settings

THREADS_ENV = "CPU_THREADS_PER_RANK"


def per_rank() -> int:
    """The compute threads one CPU rank gets: CPU_THREADS_PER_RANK, default 1."""
    return settings.value(THREADS_ENV)


def apply(torch: Any, loader_workers: int = 0) -> dict[str, int]:
    """Give this CPU rank its share; the record goes into the run's summary and provenance.

    `torch` is the imported module (run/node/ never imports torch itself)."""
    n = per_rank()
    os.environ["OMP_NUM_THREADS"] = str(n)  # for libraries that start OpenMP later
    torch.set_num_threads(n)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:  # already set, or parallel work already started in this process
        pass
    return {"cpu_threads_per_rank": n, "cpu_loader_workers": int(loader_workers)}
