"""Shims that let torchtune 0.6.1's distributed recipes run on CPU with gloo ranks: each replaces
one name the recipes look up at call time (`training.<name>`), in this process only; with CUDA
nothing is changed.
"""

from __future__ import annotations

import gc
from typing import Any

_applied: list[str] = []


def _host_memory_stats(device: Any = None, reset_stats: bool = True) -> dict[str, float]:
    """training.get_memory_stats raises on CPU, and the distributed recipes call it after model
    init to print it: the peak host RSS in its GiB keys (the summary labels it host RSS)."""
    from run.llm.metrics import GIB, host_peak_rss_bytes

    rss = host_peak_rss_bytes() / GIB
    return {"peak_memory_active": rss, "peak_memory_alloc": rss, "peak_memory_reserved": rss}


def _cleanup_before_training() -> None:
    """training.cleanup_before_training's torch.cpu.empty_cache() and reset_peak_memory_stats()
    do not exist: on CPU only its gc.collect() has anything to do."""
    gc.collect()


def apply(cuda: bool) -> list[str]:
    """Install the shims when there is no CUDA; their names, for the run log."""
    if cuda or _applied:
        return list(_applied)
    from torchtune import training

    training.get_memory_stats = _host_memory_stats
    training.cleanup_before_training = _cleanup_before_training
    _applied.extend(["training.get_memory_stats", "training.cleanup_before_training"])
    # Not needed here: qat_lora_finetune_distributed's assertion that its fake-quantize config is
    # a FakeQuantizeConfig (torchao 0.15 hands it an IntxFakeQuantizeConfig). Our QAT runs use
    # qat_distributed, the full-model QAT recipe the paper's memory figures point to.
    return list(_applied)
