"""An LLM fine-tuning run spec (one cell of an L* experiment): its keys, checks and name, and what
cannot run. run/llm/launch.py turns it into the command; run/llm/tune.py runs it.

`auto` keys resolve in `canonical`; the README ("How a run works", Llama3-8B) says why 8B names
carry `-random` and `-tok_<kind>`: a stand-in never passes for a real run, nor results of two
tokenizers for one. `recipe: distributed` runs the distributed recipe on 1 rank too (gpu-check
tests FSDP and QAT on one GPU); `data_source: synthetic` gives llama3_8b the generated sets.
The optimisation keys (issue 20; the defaults are the paper's, so no old name changes) are
torchtune's own options; `packed` runs take fewer steps than `planned_steps` (an upper bound), and
without CUDA bitsandbytes 0.50.2 keeps paged_adamw8bit's states unpaged (the summary says so).
"""

from __future__ import annotations

import csv
import functools
import math
from typing import Any

from run import settings
from run.llm import catalog
from run.llm.catalog import SYNTHETIC_ROWS
from run.node import busy, toolchain

METHODS = ("lora", "qlora", "dpo", "qat")
METHOD_LABELS = {"lora": "LoRA", "qlora": "QLoRA", "dpo": "DPO", "qat": "QAT"}  # as the papers say
DATASETS = (*catalog.DATASETS, *catalog.TEMPLATES)
TEMPLATE_DATASETS = tuple(catalog.TEMPLATES)  # in the papers' order
# torchtune's PackedDataset packs (and so tokenises) every row before the first step; above this
# many rows (C4-200M's grammar set) that is hours of start-up, not an optimisation.
PACK_MAX_ROWS = 1_000_000
# The cap of max_seq_len 0. The papers state none: 2048 is above nearly every row of the paper's
# sets with the real tokenizer, and bounds the byte tokenizer's sequences (about 4x longer).
DEFAULT_MAX_SEQ_LEN = {"tiny": 768, "llama3_8b": 2048}
TINY_CONTEXT = 1024  # the tiny llama3's max_seq_len (run/llm/tiny.py TINY_ARCH)
# A run longer than this is a mistake in the matrix (an unbounded epoch), not an experiment.
MAX_PLANNED_STEPS = 50_000
# The paper's parent sets in reference/paper/table4_llm_datasets.csv (rows per set).
PAPER_DATASET_NAMES = {**{name: name for name in catalog.DATASETS}, "alpaca": "alpaca-cleaned"}

DEFAULTS: dict[str, Any] = {
    "workload": "llm",
    "model": "tiny",
    "weights": "auto",
    "method": "lora",
    "dataset": "alpaca",
    "gpus": 1,
    "pin_memory": False,
    "batch_size": 2,
    "lr": 3e-4,
    "warmup_steps": 100,
    "epochs": 1,
    "max_steps": 0,
    "template_rows": 500,
    "dtype": "fp32",
    "gradient_accumulation_steps": 1,
    "activation_checkpointing": False,
    "shuffle": True,
    "seed": 0,
    "profiler": "none",
    "tokenizer": "auto",
    "max_seq_len": 0,
    "recipe": "auto",
    "data_source": "auto",
    # Beyond the paper (issue 20): torchtune's own config options; the defaults are the paper's.
    "compile": False,
    "packed": False,
    "fused_optimizer": False,
    "optimizer": "adamw",
}

CHOICES: dict[str, tuple[Any, ...]] = {
    "workload": ("llm",),
    "model": ("tiny", "llama3_8b"),
    "weights": ("auto", "tiny", "real", "random"),
    "method": METHODS,
    "dataset": DATASETS,
    "pin_memory": (False, True),
    "dtype": ("fp32", "bf16"),
    "activation_checkpointing": (False, True),
    "shuffle": (False, True),
    "profiler": settings.PROFILERS,
    "tokenizer": ("auto", "bytes", "llama3"),
    "recipe": ("auto", "distributed"),
    "data_source": ("auto", "synthetic", "real"),
    "compile": (False, True),
    "packed": (False, True),
    "fused_optimizer": (False, True),
    "optimizer": ("adamw", "paged_adamw8bit"),
}
POSITIVE = ("gpus", "batch_size", "epochs", "template_rows", "gradient_accumulation_steps")
AT_LEAST_ZERO = ("max_steps", "warmup_steps", "seed", "max_seq_len")
LEAST = {**dict.fromkeys(POSITIVE, 1), **dict.fromkeys(AT_LEAST_ZERO, 0)}


def validate(spec: dict[str, Any]) -> None:
    busy.check_keys("llm", spec, DEFAULTS, CHOICES, LEAST, ("lr",))
    if spec["model"] == "tiny":
        if spec["weights"] not in ("auto", "tiny"):
            raise ValueError(f"weights={spec['weights']!r} does not apply to the tiny model")
        if spec["tokenizer"] == "llama3":
            raise ValueError("tokenizer='llama3' does not fit the tiny model (512 tokens)")
        if spec["data_source"] == "real":
            raise ValueError("data_source='real' does not apply to the tiny model")
        if spec["max_seq_len"] > TINY_CONTEXT:
            raise ValueError(f"max_seq_len={spec['max_seq_len']} exceeds the tiny model's context")
    elif spec["weights"] == "tiny":
        raise ValueError(f"weights='tiny' needs model tiny, not {spec['model']}")
    if spec["weights"] == "real" and spec["tokenizer"] == "bytes":
        raise ValueError("real Llama3-8B weights need the llama3 tokenizer, not bytes")
    _check_optimisations(spec)
    steps = planned_steps(spec)
    if steps > MAX_PLANNED_STEPS:
        raise ValueError(
            f"{steps:,} steps planned ({dataset_rows(spec):,} rows of {spec['dataset']}, "
            f"{spec['gpus']} rank(s), max_steps {spec['max_steps'] or 'none: whole epoch'}): "
            f"more than {MAX_PLANNED_STEPS:,}; set max_steps"
        )


def _check_optimisations(spec: dict[str, Any]) -> None:
    """Combinations of the optimisation keys that torchtune 0.6.1 refuses or silently ignores (a
    run named for an optimisation it did not get would be a wrong result)."""
    if spec["packed"] and spec["method"] == "dpo":
        raise ValueError("packed=true does not apply to dpo: torchtune packs SFT sets, not pairs")
    if spec["packed"] and dataset_rows(spec) > PACK_MAX_ROWS:
        raise ValueError(
            f"packed=true with {spec['dataset']} would pack all {dataset_rows(spec):,} rows "
            f"before the first step (more than {PACK_MAX_ROWS:,})"
        )
    if spec["compile"] and spec["method"] == "qat":
        raise ValueError("compile=true with qat: torchtune 0.6.1's qat_distributed refuses it")
    if spec["compile"] and spec["method"] == "dpo" and distributed(spec):
        raise ValueError(
            "compile=true with distributed dpo: torchtune 0.6.1's lora_dpo_distributed ignores it"
        )
    if spec["fused_optimizer"] and spec["optimizer"] != "adamw":
        raise ValueError(f"fused_optimizer=true applies to adamw, not {spec['optimizer']}")


def resolve_weights(spec: dict[str, Any]) -> str:
    if spec["model"] == "tiny":
        return "tiny"
    if spec["weights"] != "auto":
        return spec["weights"]
    return "real" if settings.given("LLAMA3_DIR") else "random"


def resolve_tokenizer(spec: dict[str, Any]) -> str:
    if spec["model"] == "tiny":
        return "bytes"
    if spec["tokenizer"] != "auto":
        return spec["tokenizer"]
    given = settings.given("LLAMA3_TOKENIZER") or settings.given("LLAMA3_DIR")
    return "llama3" if given or resolve_weights(spec) == "real" else "bytes"


def resolve_data_source(spec: dict[str, Any]) -> str:
    if spec["data_source"] != "auto":
        return spec["data_source"]
    return "synthetic" if spec["model"] == "tiny" else "real"


def canonical(spec: dict[str, Any]) -> dict[str, Any]:
    """Everything `auto` resolved, so a spec names exactly what runs (and its run name says it)."""
    spec = dict(spec)
    spec["weights"] = resolve_weights(spec)
    spec["tokenizer"] = resolve_tokenizer(spec)
    spec["data_source"] = resolve_data_source(spec)
    spec["max_seq_len"] = spec["max_seq_len"] or DEFAULT_MAX_SEQ_LEN[spec["model"]]
    return spec


def distributed(spec: dict[str, Any]) -> bool:
    """Whether the run uses torchtune's distributed recipe (and torchrun)."""
    return spec["gpus"] > 1 or spec.get("recipe") == "distributed"


def run_name(spec: dict[str, Any]) -> str:
    dataset = spec["dataset"]
    if dataset in TEMPLATE_DATASETS:
        dataset = f"{dataset}-r{spec['template_rows']}"
    parts = [
        spec["model"],
        spec["method"],
        dataset,
        f"{spec['gpus']}gpu",
        "pin" if spec["pin_memory"] else "nopin",
    ]
    if spec["max_steps"]:
        parts.append(f"s{spec['max_steps']}")
    if spec.get("recipe") == "distributed" and spec["gpus"] == 1:
        parts.append("dist")
    cap = spec.get("max_seq_len") or DEFAULT_MAX_SEQ_LEN[spec["model"]]
    if cap != DEFAULT_MAX_SEQ_LEN[spec["model"]]:
        parts.append(f"seq{cap}")
    if spec["model"] != "tiny":
        if resolve_data_source(spec) == "synthetic":
            parts.append("synth")
        if resolve_weights(spec) == "random":
            parts.append("random")
        parts.append(f"tok_{resolve_tokenizer(spec)}")
    flags = {"compile": "compile", "packed": "packed", "fused_optimizer": "fused"}
    parts += [part for key, part in flags.items() if spec.get(key)]
    if spec.get("optimizer") == "paged_adamw8bit":
        parts.append("paged8bit")
    if spec["profiler"] != "none":
        parts.append(f"prof_{spec['profiler']}")
    # a repeat's seed (run/sweep/matrix.py, REPEATS): the default adds nothing to single runs
    if spec.get("seed", DEFAULTS["seed"]) != DEFAULTS["seed"]:
        parts.append(f"seed{spec['seed']}")
    parts += busy.name_parts(spec)  # a run beside a busy core (the noise cells' busy repeat)
    return "-".join(parts)


@functools.cache
def paper_dataset_rows() -> dict[str, int]:
    """Rows of the paper's parent sets, as Table 4 gives them (for planning only)."""
    from run.store import REFERENCE_DIR

    with open(REFERENCE_DIR / "table4_llm_datasets.csv") as fh:
        by_name = {r["dataset"]: int(r["rows"]) for r in csv.DictReader(fh)}
    return {ours: by_name[theirs] for ours, theirs in PAPER_DATASET_NAMES.items()}


def dataset_rows(spec: dict[str, Any]) -> int:
    """Rows of the training set a spec tunes on (template subsets: template_rows)."""
    if spec["dataset"] in TEMPLATE_DATASETS:
        return spec["template_rows"]
    if resolve_data_source(spec) == "synthetic":
        return SYNTHETIC_ROWS[spec["dataset"]]
    return paper_dataset_rows()[spec["dataset"]]


def planned_steps(spec: dict[str, Any]) -> int:
    """Optimizer steps one rank takes, as torchtune's recipes count them: a DistributedSampler
    shard (padded to ceil(rows / ranks)), batches with drop_last, gradient accumulation, capped
    by max_steps per epoch."""
    per_rank = math.ceil(dataset_rows(spec) / spec["gpus"])
    steps = (per_rank // spec["batch_size"]) // spec["gradient_accumulation_steps"]
    if spec["max_steps"]:
        steps = min(steps, spec["max_steps"])
    return steps * spec["epochs"]


def unsupported_reason(spec: dict[str, Any]) -> str | None:
    """Cells that torchtune 0.6.1 (and the paper) cannot run; recorded, never launched."""
    if spec["method"] == "qlora" and distributed(spec):
        return (
            "QLoRA runs on one device only: torchtune 0.6.1 ships no distributed QLoRA recipe "
            "(the paper could not run it on more GPUs either)"
        )
    if spec["method"] == "qat" and not distributed(spec):
        return (
            "QAT needs several devices: torchtune 0.6.1 ships only qat_distributed, no "
            "single-device QAT recipe (the paper ran QAT on 4 GPUs, out of memory on fewer)"
        )
    if spec.get("optimizer") == "paged_adamw8bit" and distributed(spec):
        # measured: a 2-rank gloo step on a DTensor parameter fails in bitsandbytes' own op; the
        # dispatch is the same on CUDA
        return (
            "paged 8-bit AdamW cannot step FSDP2 parameters: bitsandbytes 0.50.2's "
            "optimizer_update_8bit_blockwise gets DTensors mixed with its plain state tensors"
        )
    if spec.get("compile"):
        # the same inductor needs as a vision run's (C++ compiler, Python.h, Triton on a GPU)
        return toolchain.compile_blocker()
    if spec.get("packed") and toolchain.cuda_available():
        # on a GPU torchtune 0.6.1 masks packed samples with flex attention, which it wraps in
        # torch.compile itself (modules/attention_utils.py), also with compile: False
        why = toolchain.compile_blocker()
        if why:
            return f"packed data on a GPU: torchtune compiles flex attention, and {why}"
    return None
