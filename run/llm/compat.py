"""Shims that let torchtune 0.6.1's distributed recipes run on CPU with gloo ranks.

`apply()` is called by run/llm/tune.py before a recipe is built. Where CUDA is available it
changes nothing: the GPU runs use torchtune exactly as installed. Each shim replaces one name the
recipes look up at call time (`training.<name>`), in this process only; no file is edited.
"""

from __future__ import annotations

import gc
from typing import Any

_applied: list[str] = []


def process_group_backend(cuda: bool) -> str:
    """The backend our launcher passes to init_process_group.

    torchtune's distributed recipe_main calls init_process_group("cuda:nccl,cpu:gloo"); the CPU
    build of torch has no NCCL, so without CUDA the process group is plain gloo. (We call the
    recipe class ourselves rather than its recipe_main, so this is the only place it is decided.)
    """
    return "cuda:nccl,cpu:gloo" if cuda else "gloo"


def _host_memory_stats(device: Any = None, reset_stats: bool = True) -> dict[str, float]:
    """training.get_memory_stats raises on CPU; the distributed recipes call it unconditionally
    after model init (to log it). On CPU report the process's peak host RSS in the same GiB keys,
    which the recipes only print; our metric logger labels CPU memory as host RSS separately."""
    from run.llm.metrics import GIB, host_peak_rss_bytes

    rss = host_peak_rss_bytes() / GIB
    return {"peak_memory_active": rss, "peak_memory_alloc": rss, "peak_memory_reserved": rss}


def _cleanup_before_training() -> None:
    """training.cleanup_before_training calls torch.cpu.empty_cache() and
    torch.cpu.reset_peak_memory_stats(), which do not exist; on CPU only the gc.collect() part
    has anything to do."""
    gc.collect()


def apply(cuda: bool) -> list[str]:
    """Install the shims when there is no CUDA; returns their names (printed in the run log)."""
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
