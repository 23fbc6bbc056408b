"""One LLM fine-tuning run: torchtune's own recipe, configured from a run spec.

    python -m run.llm.tune --run-dir DIR                                  # 1 device
    torchrun --standalone --nproc_per_node 2 -m run.llm.tune --run-dir DIR  # 2 GPUs / gloo ranks

DIR/spec.json holds the spec (run/llm/spec.py). Bad input is one line `error: ...`, exit 2, before
anything is written; then DIR/torchtune_config.yaml (run/llm/config.py), the CPU shims without
CUDA (run/llm/compat.py), torchtune's recipe extended (run/llm/recipes.py) and run as its
recipe_main does, and DIR/summary.json last; a CUDA out-of-memory error is status "oom", exit 3.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from run import settings, store
from run.llm import compat
from run.llm import spec as llm_spec
from run.llm.config import PAGED_ADAMW8BIT, SpecError, prepare
from run.llm.metrics import host_peak_rss_bytes
from run.llm.recipes import extended, recipe_name
from run.node import lifeline
from run.node import threads as cpu_threads
from run.program import program
from run.store import TORCHTUNE_CONFIG

OOM_MARKERS = ("CUDA out of memory", "CUBLAS_STATUS_ALLOC_FAILED", "out of memory")


def is_oom(exc: BaseException) -> bool:
    import torch

    return isinstance(exc, torch.OutOfMemoryError) or (
        isinstance(exc, RuntimeError) and any(m in str(exc) for m in OOM_MARKERS)
    )


def one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:500]


def optimizer_facts(spec: dict[str, Any], optimizer: Any, cuda: bool) -> dict[str, Any]:
    """What the optimisation keys gave this run, for the summary: the optimizer, whether its
    states were paged (bitsandbytes pages only on CUDA), and the bytes of its states on this rank
    (the share of memory an 8-bit optimizer saves, measured where host RSS hides it)."""
    import torch

    state_bytes, share_8bit = None, None
    if optimizer is not None:
        state_bytes, seen, params, params_8bit = 0, set(), 0, 0
        for param, state in optimizer.state.items():
            eight = False
            for value in state.values():
                local = value.to_local() if hasattr(value, "to_local") else value  # FSDP2 shard
                # bitsandbytes hands every parameter the same two quantisation maps: count once
                if not hasattr(local, "element_size") or local.data_ptr() in seen:
                    continue
                if local.numel() > 1:
                    seen.add(local.data_ptr())
                state_bytes += local.numel() * local.element_size()
                eight |= local.dtype == torch.uint8
            params += param.numel()
            params_8bit += param.numel() if eight else 0
        # bitsandbytes keeps tensors under min_8bit_size (4,096) elements in 32 bits: the share of
        # the parameters whose states are 8-bit says whether an 8-bit saving can show at all
        share_8bit = params_8bit / params if params else None
    paged = spec["optimizer"] == "paged_adamw8bit"
    # fused is the config's (the paper's configs set it), not only fused_optimizer's
    defaults = getattr(optimizer, "defaults", {})
    return {
        "optimizer": PAGED_ADAMW8BIT if paged else "torch.optim.AdamW",
        "optimizer_fused": bool(defaults.get("fused")) if optimizer is not None else None,
        "optimizer_paged": paged and cuda,
        "optimizer_state_bytes": state_bytes,
        "optimizer_state_8bit_share": share_8bit,
        "compile": spec["compile"],
        "packed": spec["packed"],
    }


def run_recipe(
    spec: dict[str, Any], cfg_dict: dict[str, Any], facts: dict[str, Any], run_dir: Path, cuda: bool
) -> int:
    """Run the recipe; rank 0 (or a rank that ran out of memory) writes the summary, once."""
    import torch

    t_wall = time.perf_counter()
    rank = settings.rank()
    shims = compat.apply(cuda)
    if shims and rank == 0:
        print(f"[llm_tune] CPU shims active: {', '.join(shims)}", flush=True)
    # a rank stands for one GPU: the same one-thread share at every rank count (run/node/threads.py)
    cpu_share = {} if cuda else cpu_threads.apply(torch)
    distributed = llm_spec.distributed(spec)
    if distributed:
        # the device is bound before NCCL starts, so each rank's communicator is on its own GPU
        device = None
        if cuda:
            device = torch.device("cuda", settings.local_rank())
            torch.cuda.set_device(device)
        # torchtune's recipe_main passes "cuda:nccl,cpu:gloo" (we call the recipe class, not its
        # recipe_main); the CPU build of torch has no NCCL, so without CUDA it is plain gloo
        backend = "cuda:nccl,cpu:gloo" if cuda else "gloo"
        torch.distributed.init_process_group(backend=backend, device_id=device)
    try:
        name = recipe_name(spec["method"], distributed)
        recipe, status, error, t_train0 = train(name, cfg_dict, rank)
        if rank != 0 and status == "ok":
            return 0
        logger = getattr(recipe, "_metric_logger", None)
        numbers = logger.summary() if logger is not None else {}
        head = {
            "name": llm_spec.run_name(spec),
            "status": status,
            "error": error,
            "recipe": name,
            "world_size": settings.world_size(),
            "device": "cuda" if cuda else "cpu",
            "weights": spec["weights"],
            "tokenizer": facts.get("tokenizer"),
            "max_seq_len": spec["max_seq_len"],
            "planned_steps": llm_spec.planned_steps(spec),
            "wall_time_s": time.perf_counter() - t_wall,
            "cpu_shims": shims,
            **cpu_share,
        }
        summary = summary_of(spec, head, recipe, numbers, cuda, t_train0)
        if status == "oom" and (run_dir / store.SUMMARY).exists():
            return 3  # another rank recorded the OOM first
        store.write_json_atomic(run_dir / store.SUMMARY, summary)
        print(
            f"[llm_tune] {status}: {numbers.get('steps')} steps, s/it {numbers.get('s_per_it')}, "
            f"loss {numbers.get('first_loss')} -> {numbers.get('final_loss')}",
            flush=True,
        )
        return 3 if status == "oom" else 0
    finally:
        # the distributed recipes' cleanup() destroys the group; after an OOM it is still up
        if distributed and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()


def train(name: str, cfg_dict: dict[str, Any], rank: int) -> tuple[Any, str, str | None, float]:
    """Build torchtune's recipe `name` with our extension and run setup/train/cleanup as its own
    recipe_main does: (the recipe, status ok or oom, the one-line error, when training began).
    A CUDA out-of-memory error is a result (status "oom"); any other error propagates."""
    from omegaconf import OmegaConf
    from torchtune import config as tt_config

    cls = extended(name)
    cfg = OmegaConf.create(cfg_dict)
    tt_config.log_config(recipe_name=cls.__name__, cfg=cfg)
    status, error = "ok", None
    recipe = None
    t_train0 = time.perf_counter()
    try:
        recipe = cls(cfg=cfg)
        recipe.setup(cfg=cfg)
        t_train0 = time.perf_counter()
        recipe.train()
        recipe.cleanup()
    except Exception as exc:
        if not is_oom(exc):
            raise
        status, error = "oom", one_line(exc)
        print(f"[llm_tune] rank {rank}: out of memory: {error}", file=sys.stderr, flush=True)
    return recipe, status, error, t_train0


def summary_of(
    spec: dict[str, Any],
    head: dict[str, Any],
    recipe: Any,
    numbers: dict[str, Any],
    cuda: bool,
    t_train0: float,
) -> dict[str, Any]:
    """DIR/summary.json: `head` (what ran and how), times, the logger's numbers, the data set's
    size, what the optimisation keys gave and the peak memory; later parts win."""
    stats = dict(getattr(recipe, "dataset_stats", {}) or {})
    train_time = getattr(getattr(recipe, "_metric_logger", None), "train_time_s", None)
    if train_time is None:
        train_time = time.perf_counter() - t_train0
    # an epoch's steps are the recipe's batches over gradient accumulation; its time is the
    # measured one when the run covered a whole epoch, else projected from s/it and flagged
    batches = stats.get("batches_per_epoch")
    per_epoch = None if batches is None else batches // spec["gradient_accumulation_steps"]
    full_epoch = bool(per_epoch) and numbers.get("steps") == per_epoch
    s_per_it = numbers.get("s_per_it")
    projected = s_per_it * per_epoch if s_per_it and per_epoch else None
    epoch_time = train_time if full_epoch else projected
    summary: dict[str, Any] = {
        **head,
        "total_time_s": train_time,
        "steps_per_epoch": per_epoch,
        "epoch_time_s": epoch_time,
        "epoch_time_projected": not full_epoch if epoch_time is not None else None,
        **numbers,
        **stats,
    }
    summary.update(optimizer_facts(spec, getattr(recipe, "_optimizer", None), cuda))
    if cuda:
        # L8 reads the last step's peak, as the paper read its logs; the maximum over steps
        # (often the first step) is kept beside it
        peak = numbers.get("peak_memory_active_last_bytes")
        peak_max = numbers.get("peak_memory_active_bytes")
    else:
        peak = peak_max = host_peak_rss_bytes()
    summary["memory_kind"] = store.GPU_ACTIVE if cuda else store.HOST_PEAK_RSS
    summary["peak_memory_bytes"] = peak
    summary["peak_memory_max_bytes"] = peak_max
    return summary


@program()
def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--run-dir", required=True, type=Path, help="run folder holding spec.json")
    ap.add_argument("--spec", type=Path, help="spec file (default: RUN_DIR/spec.json)")
    args = ap.parse_args(argv)
    # torchrun starts ranks in sessions of their own: a rank ends with its launcher, however
    # that died (run/node/lifeline.py), instead of writing on into a staging folder.
    lifeline.tie_to_parent()
    rank = settings.rank()
    world = settings.world_size()
    run_dir: Path = args.run_dir.resolve()
    spec_path = args.spec or run_dir / store.SPEC
    # a setting, SpecError, AssetError, CudaUnusable: one line from rank 0, exit 2 (program)
    if not spec_path.is_file():
        raise SpecError(f"no spec file at {spec_path}")
    try:
        spec = json.loads(spec_path.read_text())
    except json.JSONDecodeError as exc:
        raise SpecError(f"spec file {spec_path} is not valid JSON: {exc.msg}") from exc
    import torch

    from run.node import probe

    cuda = torch.cuda.is_available()
    cfg, facts = prepare(spec, run_dir, cuda)
    spec = llm_spec.canonical(spec)
    if not cuda:
        probe.check_cuda()  # GPUs that torch cannot use: stop, never tune on the CPU instead
    if spec["gpus"] != world:
        raise SpecError(
            f"spec asks for {spec['gpus']} rank(s) but {world} were started: launch with "
            f"run.llm.launch.launch_command (torchrun --nproc_per_node {spec['gpus']})"
        )
    if cuda and spec["gpus"] > torch.cuda.device_count():
        raise SpecError(f"spec asks for {spec['gpus']} GPUs, {torch.cuda.device_count()} visible")
    if rank == 0:
        store.write_text_atomic(run_dir / TORCHTUNE_CONFIG, yaml.safe_dump(cfg, sort_keys=False))
        launched = shlex.join(getattr(sys, "orig_argv", sys.argv))
        print(f"[llm_tune] rank 0 of {world}: {launched}", flush=True)
        print(f"[llm_tune] config: {run_dir / TORCHTUNE_CONFIG}", flush=True)
    return run_recipe(spec, cfg, facts, run_dir, cuda)


if __name__ == "__main__":
    sys.exit(main())
