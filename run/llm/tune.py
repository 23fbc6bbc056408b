"""One LLM fine-tuning run: torchtune's own recipe, configured from a run spec.

    python -m run.llm.tune --run-dir DIR                                  # 1 device
    torchrun --standalone --nproc_per_node 2 -m run.llm.tune --run-dir DIR  # 2 GPUs / gloo ranks

DIR/spec.json holds the run spec (run/llm/spec.py; the sweep writes it, run.llm.spec.launch_command
gives the command). Top to bottom:

1. check the spec and the machine; build or find the model, tokenizer and data files
   (`prepare`). Bad input stops here with one line `error: ...` and exit status 2, before anything
   is written into DIR.
2. build the torchtune config: configs/llm/<method>_<single_device|distributed>.yaml (the paper's
   values) with the spec's sizes, model, tokenizer, checkpointer, data set and our metric logger;
   save it as DIR/torchtune_config.yaml (rank 0) and print it and the command.
3. without CUDA, install the CPU shims (run/llm/compat.py) and give each rank one intra-op thread
   (LLM_CPU_THREADS overrides it); with several ranks, init the process group (gloo on CPU,
   torchtune's "cuda:nccl,cpu:gloo" on GPUs).
4. load torchtune's installed recipe file by path, subclass its recipe class with our extension
   (run/llm/recipes.py: pin_memory, timing, no checkpoint save), and run setup/train/cleanup as the
   recipe's own recipe_main does.
5. rank 0 writes DIR/summary.json last (run/llm/metrics.py computes its numbers from what the
   recipe logged). A CUDA out-of-memory error is caught and recorded as status "oom" (exit 3).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from run import store
from run.errors import UserError
from run.llm import TORCHTUNE_CONFIG, TORCHTUNE_OUTPUT_DIR, assets, data
from run.llm import spec as llm_spec
from run.llm.assets import AssetError
from run.node.profiling import TORCH_TRACE_DIR, fit_window, read_window

CONFIG_DIR = store.REPO / "configs" / "llm"
OOM_MARKERS = ("CUDA out of memory", "CUBLAS_STATUS_ALLOC_FAILED", "out of memory")


class SpecError(UserError):
    """The spec cannot run as given (one line)."""


def config_file(method: str, distributed: bool) -> Path:
    mode = "distributed" if distributed else "single_device"
    return CONFIG_DIR / f"{method}_{mode}.yaml"


def tokenizer_block(spec: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The `tokenizer:` block and the tokenizer's kind (bytes or llama3), capped at the spec's
    max_seq_len (llm_spec: one stated cap per model, so byte-tokenised runs stay bounded)."""
    kind = llm_spec.resolve_tokenizer(spec)
    block: dict[str, Any] = {
        "_component_": "torchtune.models.llama3.llama3_tokenizer",
        "max_seq_len": spec["max_seq_len"] or llm_spec.DEFAULT_MAX_SEQ_LEN[spec["model"]],
    }
    if kind == "bytes":
        if spec["model"] == "tiny":
            assets.ensure_tiny()
        path, special = assets.byte_tokenizer_files(assets.bytes_tokenizer_folder(spec["model"]))
        block.update(path=str(path), special_tokens_path=str(special))
    else:
        block["path"] = str(assets.llama3_tokenizer_file())
    template = data.parent_of(spec["dataset"]).prompt_template
    if template:
        block["prompt_template"] = template
    return block, kind


def checkpointer_block(spec: dict[str, Any], run_dir: Path | None) -> dict[str, Any]:
    out_dir = str((run_dir or Path("/tmp")) / TORCHTUNE_OUTPUT_DIR)
    if spec["model"] == "tiny":
        folder = assets.ensure_tiny()
        block = {
            "_component_": "torchtune.training.FullModelTorchTuneCheckpointer",
            "checkpoint_dir": str(folder),
            "checkpoint_files": ["model.pt"],
            "model_type": "LLAMA3",
        }
    elif spec["weights"] == "real":
        folder = assets.llama3_dir()
        if folder is None:
            raise AssetError("weights 'real' need LLAMA3_DIR (the Llama3-8B folder)")
        block = assets.real_checkpointer(folder)
    else:
        block = {
            "_component_": "run.llm.weights.RandomWeightsCheckpointer",
            "base_model": "torchtune.models.llama3.llama3_8b",
            "seed": spec["seed"],
            "dtype": spec["dtype"],
        }
    block.update(recipe_checkpoint=None, output_dir=out_dir)
    return block


def profiler_block(spec: dict[str, Any], run_dir: Path | None, cuda: bool) -> dict[str, Any]:
    """torchtune's profiler block; its window (run/node/profiling.py) comes from RUN/profiling.json,
    fitted to the run's planned steps here and to its real steps by the recipe extension."""
    off = {"_component_": "torchtune.training.setup_torch_profiler", "enabled": False}
    if spec["profiler"] != "torch":
        return off  # none, or nsys (which wraps the whole command instead)
    from run.llm.metrics import timing_warmup

    window = read_window(run_dir)
    steps = llm_spec.planned_steps(spec)
    # The window opens after the steps the timings leave out, or later if the profile says so.
    wait = max(timing_warmup(spec["warmup_steps"], steps), window["wait_steps"])
    fitted, _ = fit_window({**window, "wait_steps": wait}, steps, "torch")
    return {
        **off,
        "enabled": True,
        "output_dir": str((run_dir or Path("/tmp")) / TORCH_TRACE_DIR),
        "cpu": True,
        "cuda": cuda,
        # torchtune's setup_torch_profiler defaults xpu to True: torch then warns on every run
        "xpu": False,
        "profile_memory": False,
        "with_stack": False,
        "record_shapes": True,
        "with_flops": False,
        "wait_steps": fitted["wait_steps"],
        "warmup_steps": fitted["warmup_steps"],
        "active_steps": fitted["active_steps"],
        "num_cycles": 1,
    }


PAGED_ADAMW8BIT = "bitsandbytes.optim.PagedAdamW8bit"


def optimizer_block(spec: dict[str, Any], paper: dict[str, Any]) -> dict[str, Any]:
    """The `optimizer:` block: the paper's (torch.optim.AdamW, its config's weight decay) with the
    spec's learning rate, fused if asked, or bitsandbytes' paged 8-bit AdamW with the same lr and
    weight decay. The recipes build it with config.instantiate(cfg.optimizer, params)."""
    block = {**paper, "lr": spec["lr"]}
    if spec["optimizer"] == "paged_adamw8bit":
        # Same hyper-parameters; `fused` is torch's option, bitsandbytes has none. Without CUDA
        # bitsandbytes 0.50.2 steps it with 8-bit states in ordinary memory (it warns "Paged
        # optimizers are not supported on CPU"); the summary records whether paging was on.
        block = {"_component_": PAGED_ADAMW8BIT, "lr": spec["lr"]}
        if "weight_decay" in paper:
            block["weight_decay"] = paper["weight_decay"]
    elif spec["fused_optimizer"]:
        block["fused"] = True
    return block


def build_config(
    spec: dict[str, Any], run_dir: Path | None, cuda: bool
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The full torchtune config of a run (plain dict) and facts about it for the summary;
    makes any missing asset or data file."""
    from run.llm.recipes import recipe_name
    from run.llm.tiny import TINY_FOR

    if recipe_name(spec["method"], llm_spec.distributed(spec)) is None:
        raise SpecError(llm_spec.unsupported_reason(spec) or f"no recipe for {spec['method']}")
    cfg = yaml.safe_load(config_file(spec["method"], llm_spec.distributed(spec)).read_text())
    cfg["output_dir"] = str((run_dir or Path("/tmp")) / TORCHTUNE_OUTPUT_DIR)
    cfg["device"] = "cuda" if cuda else "cpu"
    cfg["dtype"] = spec["dtype"]
    cfg["seed"] = spec["seed"]
    cfg["shuffle"] = spec["shuffle"]
    cfg["batch_size"] = spec["batch_size"]
    cfg["epochs"] = spec["epochs"]
    cfg["max_steps_per_epoch"] = spec["max_steps"] or None
    cfg["gradient_accumulation_steps"] = spec["gradient_accumulation_steps"]
    cfg["enable_activation_checkpointing"] = spec["activation_checkpointing"]
    cfg["optimizer"] = optimizer_block(spec, cfg["optimizer"])
    # torchtune's `compile: True`: the recipes compile each transformer layer
    # (training.compile_model) and the loss (training.compile_loss) before the first step.
    cfg["compile"] = spec["compile"]
    if "lr_scheduler" in cfg:
        cfg["lr_scheduler"]["num_warmup_steps"] = spec["warmup_steps"]
    if spec["model"] == "tiny":
        cfg["model"]["_component_"] = TINY_FOR[cfg["model"]["_component_"]]
        if "quantizer" in cfg:
            cfg["quantizer"]["groupsize"] = assets.QAT_TINY_GROUPSIZE
    # the checkpoint first: a wrong LLAMA3_DIR is reported as such, not as a missing tokenizer
    cfg["checkpointer"] = checkpointer_block(spec, run_dir)
    cfg["tokenizer"], tokenizer_kind = tokenizer_block(spec)
    cfg["dataset"] = data.dataset_config(
        spec["dataset"],
        spec["method"],
        spec["model"],
        spec["template_rows"],
        llm_spec.resolve_data_source(spec),
    )
    if spec["method"] != "dpo":  # preference_dataset has no packing (llm_spec refuses it)
        # PackedDataset packs rows into max_seq_len tokens (the tokenizer's cap) and the recipe
        # switches to padded_collate_packed; the loss ignores the padding, so tokens/s counts
        # only real tokens, packed or not.
        cfg["dataset"]["packed"] = spec["packed"]
    cfg["metric_logger"] = {
        "_component_": "run.llm.metrics.RunMetricLogger",
        "run_dir": str(run_dir or "/tmp"),
        "warmup_steps": spec["warmup_steps"],
        "world_size": spec["gpus"],
    }
    cfg["log_peak_memory_stats"] = True
    cfg["profiler"] = profiler_block(spec, run_dir, cuda)
    cfg["pin_memory"] = spec["pin_memory"]
    cfg["run_dir"] = str(run_dir or "/tmp")  # where the recipe extension records the profiler fit
    cfg["save_final_checkpoint"] = False
    cfg["dataset_stats"] = spec["dataset"] in llm_spec.TEMPLATE_DATASETS
    return cfg, {"tokenizer": tokenizer_kind}


def prepare(
    spec: dict[str, Any], run_dir: Path | None = None, cuda: bool = False
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Check a spec and make everything it needs: (torchtune config, facts), or a one-line
    SpecError/AssetError."""
    try:
        llm_spec.validate(spec)
    except ValueError as exc:
        raise SpecError(str(exc)) from exc
    spec = llm_spec.canonical(spec)
    reason = llm_spec.unsupported_reason(spec)
    if reason:
        raise SpecError(reason)
    return build_config(spec, run_dir, cuda)


def device_check(spec: dict[str, Any], world: int, cuda: bool) -> None:
    from run.node import probe

    if not cuda:
        probe.check_cuda()  # GPUs that torch cannot use: stop, never tune on the CPU instead
    if spec["gpus"] != world:
        raise SpecError(
            f"spec asks for {spec['gpus']} rank(s) but {world} were started: launch with "
            f"run.llm.spec.launch_command (torchrun --nproc_per_node {spec['gpus']})"
        )
    if cuda:
        import torch

        if spec["gpus"] > torch.cuda.device_count():
            raise SpecError(
                f"spec asks for {spec['gpus']} GPUs, {torch.cuda.device_count()} visible"
            )


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
    import torch

    from run.llm import compat

    t_wall = time.perf_counter()
    rank = int(os.environ.get("RANK", "0"))
    shims = compat.apply(cuda)
    if shims and rank == 0:
        print(f"[llm_tune] CPU shims active: {', '.join(shims)}", flush=True)
    threads = None
    if not cuda:
        # A rank stands for one GPU, so it gets one core's worth of intra-op threads (torchrun
        # sets OMP_NUM_THREADS=1 for several ranks anyway): n ranks have n times one rank's
        # compute, as n GPUs do, and a 1-rank run does not slow down from oversubscribed threads
        # when other jobs share the cores. LLM_CPU_THREADS overrides it.
        threads = int(os.environ.get("LLM_CPU_THREADS", "1"))
        torch.set_num_threads(threads)
    distributed = llm_spec.distributed(spec)
    if distributed:
        # the device is bound before NCCL starts, so each rank's communicator is on its own GPU
        device = None
        if cuda:
            device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
            torch.cuda.set_device(device)
        torch.distributed.init_process_group(
            backend=compat.process_group_backend(cuda), device_id=device
        )
    try:
        return _run(spec, cfg_dict, facts, run_dir, cuda, shims, threads, t_wall)
    finally:
        # the distributed recipes' cleanup() destroys the group; after an OOM it is still up
        if distributed and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()


def _run(
    spec: dict[str, Any],
    cfg_dict: dict[str, Any],
    facts: dict[str, Any],
    run_dir: Path,
    cuda: bool,
    shims: list[str],
    threads: int | None,
    t_wall: float,
) -> int:
    from omegaconf import OmegaConf
    from torchtune import config as tt_config

    from run.llm.metrics import host_peak_rss_bytes
    from run.llm.recipes import extended, recipe_name

    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    name = recipe_name(spec["method"], llm_spec.distributed(spec))
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
    logger = getattr(recipe, "_metric_logger", None)
    if rank != 0 and status == "ok":
        return 0
    numbers = logger.summary() if logger is not None else {}
    stats = dict(getattr(recipe, "dataset_stats", {}) or {})
    steps_per_epoch = None
    if stats.get("batches_per_epoch") is not None:
        steps_per_epoch = stats["batches_per_epoch"] // spec["gradient_accumulation_steps"]
    train_time = getattr(logger, "train_time_s", None)
    if train_time is None:
        train_time = time.perf_counter() - t_train0
    full_epoch = bool(steps_per_epoch) and numbers.get("steps") == steps_per_epoch
    epoch_time = None
    if full_epoch:
        epoch_time = train_time
    elif numbers.get("s_per_it") and steps_per_epoch:
        epoch_time = numbers["s_per_it"] * steps_per_epoch
    summary: dict[str, Any] = {
        "name": llm_spec.run_name(spec),
        "status": status,
        "error": error,
        "recipe": name,
        "world_size": world,
        "device": "cuda" if cuda else "cpu",
        "weights": spec["weights"],
        "tokenizer": facts.get("tokenizer"),
        "max_seq_len": spec["max_seq_len"],
        "planned_steps": llm_spec.planned_steps(spec),
        "total_time_s": train_time,
        "wall_time_s": time.perf_counter() - t_wall,
        "steps_per_epoch": steps_per_epoch,
        "epoch_time_s": epoch_time,
        "epoch_time_projected": not full_epoch if epoch_time is not None else None,
        "cpu_shims": shims,
        "cpu_threads_per_rank": threads,
        **numbers,
        **stats,
    }
    summary.update(optimizer_facts(spec, getattr(recipe, "_optimizer", None), cuda))
    if cuda:
        # L8 reads the last step's peak, as the paper read its logs; the maximum over steps
        # (often the first step) is kept beside it
        summary["memory_kind"] = "gpu_active"
        summary["peak_memory_bytes"] = numbers.get("peak_memory_active_last_bytes")
        summary["peak_memory_max_bytes"] = numbers.get("peak_memory_active_bytes")
    else:
        summary["memory_kind"] = "host_peak_rss"
        summary["peak_memory_bytes"] = host_peak_rss_bytes()
        summary["peak_memory_max_bytes"] = summary["peak_memory_bytes"]
    if status == "oom" and (run_dir / store.SUMMARY).exists():
        return 3  # another rank recorded the OOM first
    store.write_json_atomic(run_dir / store.SUMMARY, summary)
    print(
        f"[llm_tune] {status}: {numbers.get('steps')} steps, s/it {numbers.get('s_per_it')}, "
        f"loss {numbers.get('first_loss')} -> {numbers.get('final_loss')}",
        flush=True,
    )
    return 3 if status == "oom" else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--run-dir", required=True, type=Path, help="run folder holding spec.json")
    ap.add_argument("--spec", type=Path, help="spec file (default: RUN_DIR/spec.json)")
    args = ap.parse_args(argv)
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    run_dir: Path = args.run_dir.resolve()
    spec_path = args.spec or run_dir / store.SPEC
    try:
        if not spec_path.is_file():
            raise SpecError(f"no spec file at {spec_path}")
        try:
            spec = json.loads(spec_path.read_text())
        except json.JSONDecodeError as exc:
            raise SpecError(f"spec file {spec_path} is not valid JSON: {exc.msg}") from exc
        import torch

        cuda = torch.cuda.is_available()
        cfg, facts = prepare(spec, run_dir, cuda)
        spec = llm_spec.canonical(spec)
        device_check(spec, world, cuda)
    except UserError as exc:  # SpecError, AssetError, CudaUnusable: one line, exit 2
        if rank == 0:
            print(f"error: {exc}", file=sys.stderr, flush=True)
        return 2
    if rank == 0:
        store.write_text_atomic(run_dir / TORCHTUNE_CONFIG, yaml.safe_dump(cfg, sort_keys=False))
        launched = shlex.join(getattr(sys, "orig_argv", sys.argv))
        print(f"[llm_tune] rank 0 of {world}: {launched}", flush=True)
        print(f"[llm_tune] config: {run_dir / TORCHTUNE_CONFIG}", flush=True)
    return run_recipe(spec, cfg, facts, run_dir, cuda)


if __name__ == "__main__":
    sys.exit(main())
