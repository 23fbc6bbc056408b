"""What an LLM fine-tuning run spec may hold, how it is checked, named and launched.

A spec is one cell of an L* experiment (experiments/matrix.yaml). `launch_command` turns it into
the command the sweep runs: `python -m run.llm_tune --run-dir DIR` for one device, the same under
`torchrun --standalone --nproc_per_node N` for more (gloo ranks on CPU). run/llm_tune.py reads
DIR/spec.json, builds the torchtune config and runs torchtune's own recipe.

`weights`: `tiny` for the tiny model (random weights we generate); for llama3_8b `real` reads the
checkpoint in LLAMA3_DIR and `random` builds the same architecture with random weights (time and
memory are real, the loss is meaningless). `auto` (the default) resolves when the matrix is
expanded: tiny -> tiny; llama3_8b -> real if LLAMA3_DIR is set, else random. Random-weight runs
carry `-random` in their names, so they never stand in for real ones.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

METHODS = ("lora", "qlora", "dpo", "qat")
DATASETS = ("alpaca", "grammar", "samsum", "slimorca", "instruct", "summary", "error-correction")
TEMPLATE_DATASETS = ("instruct", "summary", "error-correction")
MODELS = ("tiny", "llama3_8b")
WEIGHTS = ("auto", "tiny", "real", "random")

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
}

CHOICES: dict[str, tuple[Any, ...]] = {
    "workload": ("llm",),
    "model": MODELS,
    "weights": WEIGHTS,
    "method": METHODS,
    "dataset": DATASETS,
    "pin_memory": (False, True),
    "dtype": ("fp32", "bf16"),
    "activation_checkpointing": (False, True),
    "shuffle": (False, True),
    "profiler": ("none", "auto", "torch", "nsys"),
}


def validate(spec: dict[str, Any]) -> None:
    unknown = set(spec) - set(DEFAULTS)
    if unknown:
        raise ValueError(f"unknown llm spec key(s): {', '.join(sorted(unknown))}")
    missing = set(DEFAULTS) - set(spec)
    if missing:
        raise ValueError(f"missing llm spec key(s): {', '.join(sorted(missing))}")
    for key, allowed in CHOICES.items():
        if spec[key] not in allowed:
            raise ValueError(f"{key}={spec[key]!r} is not one of {', '.join(map(str, allowed))}")
    for key in ("gpus", "batch_size", "epochs", "template_rows", "gradient_accumulation_steps"):
        if not isinstance(spec[key], int) or isinstance(spec[key], bool) or spec[key] < 1:
            raise ValueError(f"{key}={spec[key]!r} must be a positive integer")
    for key in ("max_steps", "warmup_steps", "seed"):
        if not isinstance(spec[key], int) or isinstance(spec[key], bool) or spec[key] < 0:
            raise ValueError(f"{key}={spec[key]!r} must be an integer >= 0")
    if not isinstance(spec["lr"], (int, float)) or isinstance(spec["lr"], bool) or spec["lr"] <= 0:
        raise ValueError(f"lr={spec['lr']!r} must be a positive number")
    if spec["model"] == "tiny" and spec["weights"] not in ("auto", "tiny"):
        raise ValueError(f"weights={spec['weights']!r} does not apply to the tiny model")
    if spec["model"] != "tiny" and spec["weights"] == "tiny":
        raise ValueError(f"weights='tiny' needs model tiny, not {spec['model']}")


def resolve_weights(spec: dict[str, Any]) -> str:
    if spec["model"] == "tiny":
        return "tiny"
    if spec["weights"] != "auto":
        return spec["weights"]
    return "real" if os.environ.get("LLAMA3_DIR") else "random"


def canonical(spec: dict[str, Any]) -> dict[str, Any]:
    spec = dict(spec)
    spec["weights"] = resolve_weights(spec)
    return spec


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
    if resolve_weights(spec) == "random":
        parts.append("random")
    if spec["profiler"] != "none":
        parts.append(f"prof_{spec['profiler']}")
    return "-".join(parts)


def unsupported_reason(spec: dict[str, Any]) -> str | None:
    """Cells that torchtune 0.6.1 (and the paper) cannot run; recorded, never launched."""
    if spec["method"] == "qlora" and spec["gpus"] > 1:
        return (
            "QLoRA runs on one device only: torchtune 0.6.1 ships no distributed QLoRA recipe "
            "(the paper could not run it on more GPUs either)"
        )
    if spec["method"] == "qat" and spec["gpus"] == 1:
        return (
            "QAT needs several devices: torchtune 0.6.1 ships only qat_distributed, no "
            "single-device QAT recipe (the paper ran QAT on 4 GPUs, out of memory on fewer)"
        )
    return None


def launch_command(spec: dict[str, Any], run_dir: Path, info: dict[str, Any]) -> list[str]:
    """The command the sweep runs (cwd = repository root); stdout/stderr go to the run's log."""
    entry = ["-m", "run.llm_tune", "--run-dir", str(run_dir)]
    if spec["gpus"] == 1:
        cmd = [sys.executable, *entry]
    else:
        from run.probe import torchrun

        cmd = [*torchrun(), "--standalone", f"--nproc_per_node={spec['gpus']}", *entry]
    if spec["profiler"] == "nsys":
        # nsys around every rank (torchrun --no-python nsys profile ... python -m run.llm_tune);
        # the window is nsys's --duration (the recipe cannot open a cudaProfilerApi range).
        from run import profiling

        cmd = profiling.with_nsys(cmd, run_dir, capture_api=False)
    return cmd


def preflight(specs: list[dict[str, Any]]) -> None:
    """Before any run starts: build the tiny model, tokenizer and data files the specs need, and
    insist that real checkpoints and data sets are there. Raises ValueError with one line."""
    from run import llm_tune

    for spec in specs:
        if unsupported_reason(spec):
            continue
        llm_tune.prepare(canonical(spec))
