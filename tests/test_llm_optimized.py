"""The LLM optimisations of issue 20 through torchtune's real recipes on CPU (tiny llama3): each
variant trains, and its loss falls (issue 20 item 6).

Every run repeats the same unshuffled rows for EPOCHS epochs, so the last epoch sees the first
epoch's batches again: its loss must be lower. torch.compile on 2 shared CPU cores costs about
15 s per compilation (measured: 14.8 s for the first step of the tiny model, 12.6 s for the
recompilation when unpacked sequence lengths change), so the compiled runs are packed (one shape).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
from pathlib import Path

import pytest

from run import store
from run.llm import launch as llm_launch
from run.llm import spec as llm_spec

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parent.parent
EPOCHS = 3


@pytest.fixture(scope="module")
def llm_env(tmp_path_factory):
    """Generated model, tokenizer and data shared by this module's runs (never data/llm)."""
    env = dict(os.environ, LLM_DATA_ROOT=str(tmp_path_factory.mktemp("llmdata")))
    env["PYTHONPATH"] = str(REPO)
    for var in ("LLAMA3_DIR", "LLAMA3_TOKENIZER", "LLM_DATASETS_DIR", "PROFILER"):
        env.pop(var, None)
    return env


@pytest.fixture(scope="module")
def unpacked(tmp_path_factory, llm_env):
    """32 rows, unpacked, with bitsandbytes' PagedAdamW8bit: the paged optimizer's own run, and
    the unpacked reference of the packed run (rows, steps and tokens do not depend on the
    optimizer), made once for both."""
    return run_llm(tmp_path_factory.mktemp("unpacked"), llm_env, 32, optimizer="paged_adamw8bit")


def run_llm(tmp_path: Path, env: dict, rows: int, **over) -> tuple[dict, list]:
    spec = {
        **llm_spec.DEFAULTS,
        "dataset": "error-correction",
        "template_rows": rows,
        "epochs": EPOCHS,
        "shuffle": False,
        "warmup_steps": 0,
        "lr": 3e-3,
        **over,
    }
    llm_spec.validate(spec)
    assert llm_spec.unsupported_reason(spec) is None
    run_dir = tmp_path / llm_spec.run_name(spec)
    run_dir.mkdir()
    (run_dir / store.SPEC).write_text(json.dumps(spec))
    proc = subprocess.run(
        llm_launch.launch_command(spec, run_dir, {}),
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
        check=False,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    config = (run_dir / "torchtune_config.yaml").read_text()
    return store.read_json(run_dir / store.SUMMARY) | {"_config": config}, store.read_jsonl(
        run_dir / store.STEPS
    )


def check_learns(summary: dict, steps: list) -> None:
    assert summary["status"] == "ok" and summary["steps"] == len(steps) >= EPOCHS
    losses = [s["loss"] for s in steps]
    assert all(isinstance(v, float) and math.isfinite(v) for v in losses), losses
    per_epoch = len(steps) // EPOCHS
    first, last = losses[:per_epoch], losses[-per_epoch:]
    assert sum(last) / per_epoch < sum(first) / per_epoch, losses  # the same batches, later
    assert summary["tail_loss"] < summary["head_loss"]
    assert summary["tokens_trained"] > 0 and summary["tokens_per_s"] > 0


def test_packed_fused_compiled_lora_learns_and_packs(tmp_path, llm_env, unpacked):
    plain, _ = unpacked
    opt, steps = run_llm(tmp_path, llm_env, 32, packed=True, fused_optimizer=True, compile=True)
    check_learns(opt, steps)
    assert "compile: true" in opt["_config"] and "packed: true" in opt["_config"]
    assert opt["compile"] is True and opt["packed"] is True and opt["optimizer_fused"] is True
    # the set's own rows, not its packs of padded tokens
    assert opt["dataset_rows"] == plain["dataset_rows"] > opt["dataset_packs"] >= 1
    # packing: several rows per sequence, so fewer steps over the same rows, each with more
    # tokens; the tokens trained stay those of the rows (the last partial batch is dropped)
    assert opt["steps"] < plain["steps"]
    assert opt["tokens_trained"] / opt["steps"] > 2 * plain["tokens_trained"] / plain["steps"]
    assert 0.5 * plain["tokens_trained"] < opt["tokens_trained"] <= 1.05 * plain["tokens_trained"]


def test_paged_adamw8bit_learns_with_smaller_states(unpacked, cpu_checks):
    # the plain AdamW run of the same tiny model: gpu-check's LoRA check (the session's), of 8
    # rows (the states follow the model's trained parameters, not the rows)
    lora = cpu_checks["llm-lora"]
    plain = lora.summary()
    assert (lora.spec["method"], lora.spec["gpus"], plain["dataset_rows"]) == ("lora", 1, 8)
    assert plain["optimizer"] == "torch.optim.AdamW"
    paged, steps = unpacked
    check_learns(paged, steps)
    assert paged["optimizer"] == "bitsandbytes.optim.PagedAdamW8bit"
    assert paged["optimizer_paged"] is False  # no CUDA: bitsandbytes does not page
    # 8-bit states for the tensors of 4096 elements and more (the tiny model's MLP adapters)
    assert paged["optimizer_state_bytes"] < 0.8 * plain["optimizer_state_bytes"]


def test_two_rank_lora_with_the_optimisations_learns(tmp_path, llm_env):
    summary, steps = run_llm(
        tmp_path, llm_env, 64, gpus=2, packed=True, fused_optimizer=True, compile=True
    )
    check_learns(summary, steps)
    assert summary["world_size"] == 2 and summary["recipe"] == "lora_finetune_distributed"
    assert summary["packed"] and summary["compile"] and summary["cpu_shims"]
