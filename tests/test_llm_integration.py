"""Every LLM method through the real code path on CPU: torchtune's recipe, the tiny llama3, gloo.

Each test launches `run.llm.spec.launch_command` (python -m run.llm.tune, or torchrun with 2 gloo
ranks for the distributed recipes) on a few steps: two epochs over the same 8 rows of the Error
Correction subset, unshuffled, so the second epoch sees the batches of the first again and its
loss must be lower. About 10-25 s each on 2 cores.
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
ROWS, EPOCHS = 8, 2


@pytest.fixture(scope="module")
def llm_env(tmp_path_factory):
    """Generated model, tokenizer and data shared by this module's runs (never data/llm)."""
    root = tmp_path_factory.mktemp("llmdata")
    env = dict(os.environ)
    env.update(LLM_DATA_ROOT=str(root), PYTHONPATH=str(REPO))
    for var in ("LLAMA3_DIR", "LLAMA3_TOKENIZER", "LLM_DATASETS_DIR", "PROFILER"):
        env.pop(var, None)
    return env


def run_llm(tmp_path: Path, env: dict, method: str, gpus: int, **over) -> tuple[dict, list]:
    spec = {
        **llm_spec.DEFAULTS,
        "method": method,
        "gpus": gpus,
        "dataset": "error-correction",
        "template_rows": ROWS,
        "epochs": EPOCHS,
        "shuffle": False,
        "warmup_steps": 0,
        "lr": 3e-3,
        **over,
    }
    llm_spec.validate(spec)
    run_dir = tmp_path / llm_spec.run_name(spec)
    run_dir.mkdir()
    (run_dir / store.SPEC).write_text(json.dumps(spec))
    cmd = llm_launch.launch_command(spec, run_dir, {})
    proc = subprocess.run(
        cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=240, check=False
    )
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-3000:]
    summary = store.read_json(run_dir / store.SUMMARY)
    steps = store.read_jsonl(run_dir / store.STEPS)
    assert (run_dir / "torchtune_config.yaml").is_file()
    summary["_run_dir"] = str(run_dir)
    return summary, steps


def check_learns(summary: dict, steps: list, method: str, gpus: int) -> None:
    per_epoch = ROWS // (2 * gpus)  # batch size 2, rows split between ranks
    assert summary["status"] == "ok" and summary["world_size"] == gpus
    assert summary["steps"] == len(steps) == EPOCHS * per_epoch
    assert summary["dataset_rows"] == ROWS and summary["batches_per_epoch"] == per_epoch
    assert summary["recipe"] == llm_spec_recipe(method, gpus)
    assert summary["memory_kind"] == "host_peak_rss" and summary["peak_memory_bytes"] > 0
    assert summary["s_per_it"] > 0 and summary["total_time_s"] > 0
    losses = [s["loss"] for s in steps]
    assert all(isinstance(v, float) and math.isfinite(v) for v in losses), losses
    first, second = losses[:per_epoch], losses[per_epoch:]
    # the same batches again, after training on them: the loss must have fallen
    assert sum(second) / len(second) < sum(first) / len(first), losses


def llm_spec_recipe(method: str, gpus: int) -> str:
    from run.llm.recipes import recipe_name

    return recipe_name(method, gpus > 1)


@pytest.mark.parametrize(
    "method,gpus,over",
    [
        ("lora", 1, {}),
        ("qlora", 1, {}),
        ("dpo", 1, {"profiler": "torch"}),  # our profiler extension of the DPO recipes
        ("lora", 2, {}),
        ("dpo", 2, {}),
        ("qat", 2, {"lr": 1e-3}),
    ],
    ids=["lora-1", "qlora-1", "dpo-1", "lora-2ranks", "dpo-2ranks", "qat-2ranks"],
)
def test_method_runs_and_learns(tmp_path, llm_env, method, gpus, over):
    summary, steps = run_llm(tmp_path, llm_env, method, gpus, **over)
    check_learns(summary, steps, method, gpus)
    if method == "dpo":
        assert summary["dataset_tokens"] > 0  # chosen + rejected sequences
    if gpus > 1:
        assert summary["cpu_shims"]  # the distributed recipes needed the CPU shims
    if over.get("profiler") == "torch":
        from run.node.profiling import TORCH_TRACE_DIR

        traces = Path(summary["_run_dir"]) / TORCH_TRACE_DIR
        assert list(traces.glob("iteration_*/*.pt.trace.json.gz")), "no torch trace written"
        assert list(traces.glob("iteration_*/rank0_key_averages.txt"))
