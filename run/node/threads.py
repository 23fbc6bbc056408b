"""The CPU share of one rank: without a GPU each gloo rank stands in for one GPU, so each gets one
compute thread (CPU_THREADS_PER_RANK) at every rank count, whatever else runs.

Sharing the cores instead made 1-rank runs collapse under load (quarter-width MobileNetV2 at
24-53 img/s with 2 threads against 185-208 with 1 on a loaded 2-core machine), and every speed-up
measured the machine's load. Data-loading workers are counted beside it in the record.
"""

from __future__ import annotations

import os
from typing import Any

from run import settings

THREADS_ENV = "CPU_THREADS_PER_RANK"


def per_rank() -> int:
    return settings.value(THREADS_ENV)


def apply(torch: Any, loader_workers: int = 0) -> dict[str, int]:
    """Give this CPU rank its share; returns the record (`torch`: run/node/ never imports it)."""
    n = per_rank()
    os.environ["OMP_NUM_THREADS"] = str(n)  # for libraries that start OpenMP later
    torch.set_num_threads(n)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:  # already set, or parallel work already started in this process
        pass
    return {"cpu_threads_per_rank": n, "cpu_loader_workers": int(loader_workers)}
