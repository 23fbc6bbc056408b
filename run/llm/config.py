"""The torchtune config of an LLM run: the paper's configs/llm/<method>_<single_device|
distributed>.yaml with the spec's sizes, device, optimizer and our blocks; every file it names is
made or checked, so bad input is one line (SpecError, AssetError) before anything runs. No torch
at import (the sweep imports this).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from run import store, yamlfile
from run.errors import UserError
from run.llm import assets, tiny
from run.llm import spec as llm_spec
from run.llm.assets import AssetError
from run.llm.catalog import parent_of
from run.llm.data.subsets import dataset_config
from run.llm.metrics import timing_warmup
from run.node.profiling import TORCH_TRACE_DIR, fit_window, read_window
from run.store import TORCHTUNE_OUTPUT_DIR

CONFIG_DIR = store.REPO / "configs" / "llm"
PAGED_ADAMW8BIT = "bitsandbytes.optim.PagedAdamW8bit"


class SpecError(UserError):
    """The spec cannot run as given (one line)."""


def tokenizer_block(spec: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The `tokenizer:` block and the tokenizer's kind (bytes or llama3), capped at the spec's
    max_seq_len (llm_spec: one stated cap per model, so byte-tokenised runs stay bounded)."""
    kind = llm_spec.resolve_tokenizer(spec)
    block: dict[str, Any] = {
        "_component_": "torchtune.models.llama3.llama3_tokenizer",
        "max_seq_len": spec["max_seq_len"] or llm_spec.DEFAULT_MAX_SEQ_LEN[spec["model"]],
    }
    if kind == "bytes":
        # the tiny model keeps its byte tokenizer beside its weights (ensure_tiny writes both)
        tiny_model = spec["model"] == "tiny"
        folder = tiny.ensure_tiny() if tiny_model else assets.data_root() / "bytes_tokenizer"
        path, special = assets.byte_tokenizer_files(folder)
        block.update(path=str(path), special_tokens_path=str(special))
    else:
        block["path"] = str(assets.llama3_tokenizer_file())
    template = parent_of(spec["dataset"]).prompt_template
    if template:
        block["prompt_template"] = template
    return block, kind


def checkpointer_block(spec: dict[str, Any], run_dir: Path | None) -> dict[str, Any]:
    out_dir = str((run_dir or Path("/tmp")) / TORCHTUNE_OUTPUT_DIR)
    if spec["model"] == "tiny":
        block = {
            "_component_": "torchtune.training.FullModelTorchTuneCheckpointer",
            "checkpoint_dir": str(tiny.ensure_tiny()),
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
    window = read_window(run_dir)
    steps = llm_spec.planned_steps(spec)
    # The window opens after the steps the timings leave out, or later if the scale says so.
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
        **{key: fitted[key] for key in ("wait_steps", "warmup_steps", "active_steps")},
        "num_cycles": 1,
    }


def optimizer_block(spec: dict[str, Any], paper: dict[str, Any]) -> dict[str, Any]:
    """The paper's optimizer (its config's AdamW) with the spec's lr, fused if asked, or
    bitsandbytes' paged 8-bit AdamW with the same lr and weight decay."""
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


def sized_config(spec: dict[str, Any], run_dir: Path | None, cuda: bool) -> dict[str, Any]:
    """The paper's config file of the run's recipe with the spec's sizes, device, optimizer and
    (for the tiny model) builders; keys keep the file's order, so saved configs compare."""
    mode = "distributed" if llm_spec.distributed(spec) else "single_device"
    cfg = yamlfile.load(CONFIG_DIR / f"{spec['method']}_{mode}.yaml", SpecError)
    cfg["output_dir"] = str((run_dir or Path("/tmp")) / TORCHTUNE_OUTPUT_DIR)
    cfg["device"] = "cuda" if cuda else "cpu"
    for key in ("dtype", "seed", "shuffle", "batch_size", "epochs"):
        cfg[key] = spec[key]
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
        cfg["model"]["_component_"] = tiny.TINY_FOR[cfg["model"]["_component_"]]
        if "quantizer" in cfg:
            cfg["quantizer"]["groupsize"] = tiny.QAT_TINY_GROUPSIZE
    return cfg


def prepare(
    spec: dict[str, Any], run_dir: Path | None = None, cuda: bool = False
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Check a spec and make every file it needs: (the full torchtune config, facts for the
    summary), or a one-line SpecError/AssetError."""
    try:
        llm_spec.validate(spec)
    except ValueError as exc:
        raise SpecError(str(exc)) from exc
    spec = llm_spec.canonical(spec)
    reason = llm_spec.unsupported_reason(spec)
    if reason:
        raise SpecError(reason)
    cfg = sized_config(spec, run_dir, cuda)
    # the checkpoint first: a wrong LLAMA3_DIR is reported as such, not as a missing tokenizer
    cfg["checkpointer"] = checkpointer_block(spec, run_dir)
    cfg["tokenizer"], tokenizer_kind = tokenizer_block(spec)
    cfg["dataset"] = dataset_config(
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
