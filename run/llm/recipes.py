"""torchtune's installed recipes, loaded by path and extended (never copied, never edited).

They ship as site-packages/recipes/<name>.py, in a folder whose __init__ refuses imports; `tune run`
finds them by path too. `extended(name)` subclasses a file's recipe class with ProjectRecipeMixin:
- pin_memory (L2): the recipes build their DataLoader without it, so it is rebuilt with it.
- Timing: the metric logger (metrics.py) is started and stopped around `train()`; on CUDA the peak
  memory counters are reset first, as the distributed recipes do, so that a single-device recipe's
  first-step peak leaves out model loading.
- No checkpoint save unless `save_final_checkpoint` (an 8B merged checkpoint is 32 GB per run).
- The training set's rows and tokens (template subsets), for the summary.
- lora_dpo_* in torchtune 0.6.1 ignore the `profiler:` block: we build it from the same block and
  step it after every optimizer step, as the other recipes do at the end of each step.
- The profiler window is fitted to the run's real steps (`_steps_per_epoch` x epochs) and recorded
  by rank 0 in RUN/profiling.json: a window longer than the run never closes, and torchtune would
  write no trace.
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from run import settings

# (method, distributed) -> torchtune recipe file
RECIPES: dict[tuple[str, bool], str] = {
    ("lora", False): "lora_finetune_single_device",
    ("lora", True): "lora_finetune_distributed",
    ("qlora", False): "lora_finetune_single_device",
    ("dpo", False): "lora_dpo_single_device",
    ("dpo", True): "lora_dpo_distributed",
    ("qat", True): "qat_distributed",
}
# Recipe class defined in each file.
CLASSES = {
    "lora_finetune_single_device": "LoRAFinetuneRecipeSingleDevice",
    "lora_finetune_distributed": "LoRAFinetuneRecipeDistributed",
    "lora_dpo_single_device": "LoRADPORecipeSingleDevice",
    "lora_dpo_distributed": "LoRADPORecipeDistributed",
    "qat_distributed": "QATRecipeDistributed",
}


def recipe_name(method: str, distributed: bool) -> str | None:
    """The recipe file of a method, single-device or distributed (llm_spec.distributed)."""
    return RECIPES.get((method, bool(distributed)))


def count_tokens(ds: Any) -> int:
    """Tokens the model sees in a tokenised torchtune data set (SFT: tokens; DPO: both sides)."""
    total = 0
    for i in range(len(ds)):
        sample = ds[i]
        if "tokens" in sample:
            total += len(sample["tokens"])
        else:
            total += len(sample["chosen_input_ids"]) + len(sample["rejected_input_ids"])
    return total


class ProjectRecipeMixin:
    def __init__(self, cfg: Any) -> None:
        super().__init__(cfg)  # type: ignore[call-arg]
        self._pin_memory = bool(cfg.get("pin_memory", False))
        self._save_final_checkpoint = bool(cfg.get("save_final_checkpoint", False))
        self._want_dataset_stats = bool(cfg.get("dataset_stats", False))
        run_dir = cfg.get("run_dir", None)
        self._run_dir = Path(run_dir) if run_dir else None
        self.dataset_stats: dict[str, Any] = {}

    def _setup_data(self, *args: Any, **kwargs: Any) -> Any:
        out = super()._setup_data(*args, **kwargs)  # type: ignore[misc]
        # lora_finetune_* return the loader; lora_dpo_* return (sampler, loader)
        loader = out[1] if isinstance(out, tuple) else out
        if self._pin_memory:
            loader = type(loader)(
                dataset=loader.dataset,
                batch_size=loader.batch_size,
                sampler=loader.sampler,
                collate_fn=loader.collate_fn,
                drop_last=loader.drop_last,
                num_workers=loader.num_workers,
                pin_memory=True,
            )
        # a packed set (torchtune's PackedDataset) keeps its rows as .ds: rows and tokens are
        # counted there, not in packs of max_seq_len padded tokens
        from torchtune.datasets import PackedDataset

        packed = isinstance(loader.dataset, PackedDataset)
        rows = loader.dataset.ds if packed else loader.dataset
        self.dataset_stats = {"dataset_rows": len(rows), "batches_per_epoch": len(loader)}
        if packed:
            self.dataset_stats["dataset_packs"] = len(loader.dataset)
        if self._want_dataset_stats:
            self.dataset_stats["dataset_tokens"] = count_tokens(rows)
        self.dataset_stats["pin_memory_effective"] = bool(loader.pin_memory)
        return (out[0], loader) if isinstance(out, tuple) else loader

    def _fit_profiler(self, prof_cfg: Any) -> Any:
        if prof_cfg is None or not bool(prof_cfg.get("enabled", False)):
            return prof_cfg
        from omegaconf import OmegaConf

        from run.node import profiling

        steps = int(self._steps_per_epoch) * int(getattr(self, "total_epochs", 1))
        keys = ("wait_steps", "warmup_steps", "active_steps")
        asked = {k: int(prof_cfg.get(k, 0)) for k in keys}
        fitted, why = profiling.fit_window(asked, steps, "torch")
        if settings.rank() == 0 and self._run_dir is not None:
            requested = profiling.read_window(self._run_dir)
            profiling.record_fit(self._run_dir, requested, {**requested, **fitted}, why, steps)
        block = OmegaConf.to_container(prof_cfg, resolve=True)
        return OmegaConf.create({**block, **{k: fitted[k] for k in keys}})

    def _setup_profiler(self, cfg_profiler: Any = None) -> Any:
        return super()._setup_profiler(self._fit_profiler(cfg_profiler))  # type: ignore[misc]

    def setup(self, cfg: Any) -> None:
        super().setup(cfg)  # type: ignore[misc]
        self._own_profiler = None
        prof_cfg = cfg.get("profiler", None)
        enabled = prof_cfg is not None and bool(prof_cfg.get("enabled", False))
        optimizer = getattr(self, "_optimizer", None)
        if enabled and not hasattr(self, "_profiler") and optimizer is not None:
            from torchtune import config as tt_config

            profiler, _ = tt_config.instantiate(self._fit_profiler(prof_cfg))
            self._own_profiler = profiler
            step = optimizer.step

            def step_and_profile(*args: Any, **kwargs: Any) -> Any:
                out = step(*args, **kwargs)
                profiler.step()
                return out

            optimizer.step = step_and_profile

    def save_checkpoint(self, *args: Any, **kwargs: Any) -> None:
        if self._save_final_checkpoint:
            super().save_checkpoint(*args, **kwargs)  # type: ignore[misc]

    def train(self) -> None:
        import torch

        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()
        logger = getattr(self, "_metric_logger", None)  # rank 0 only in distributed recipes
        if logger is not None and hasattr(logger, "start"):
            logger.start()
        own = getattr(self, "_own_profiler", None)
        if own is not None:
            own.start()
        profiler = own or getattr(self, "_profiler", None)
        if logger is not None and hasattr(logger, "profiler_time") and profiler is not None:
            time_profiler_steps(profiler, logger.profiler_time)
        try:
            super().train()  # type: ignore[misc]
        finally:
            if own is not None:
                own.stop()
            if logger is not None and hasattr(logger, "stop"):
                logger.stop()


def time_profiler_steps(profiler: Any, add: Callable[[float], None]) -> None:
    """Give `add` the seconds of each profiler.step(): the step that closes a window exports the
    trace inside it (torchtune's recipes step it after logging, so the next step's record holds it)."""
    step = profiler.step

    def timed_step(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return step(*args, **kwargs)
        finally:
            add(time.perf_counter() - t0)

    profiler.step = timed_step


def extended(name: str) -> type:
    import torchtune

    path = Path(torchtune.__file__).resolve().parent.parent / "recipes" / f"{name}.py"
    if not path.is_file():
        raise FileNotFoundError(f"torchtune recipe file not found: {path}")
    spec = importlib.util.spec_from_file_location(f"torchtune_recipes.{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    base = getattr(module, CLASSES[name])
    return type(f"Project{base.__name__}", (ProjectRecipeMixin, base), {"__module__": __name__})
