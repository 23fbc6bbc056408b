"""Every LLM method through the real code path on CPU: torchtune's recipe, the tiny llama3, gloo.

The runs are gpu-check's LLM checks, made once per session (tests/real_runs.py): each through the
sweep's `execute`, which launches `run.llm.spec.launch_command` (python -m run.llm.tune, or
torchrun with 2 gloo ranks for the distributed recipes), on two epochs over the same 8 rows of the
Error Correction subset, unshuffled, so the second epoch sees the batches of the first again and
its loss must be lower (run/checks/cases.py's LLM shape).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from run import store
from run.llm.recipes import recipe_name
from run.node.profiling import TORCH_TRACE_DIR

pytestmark = pytest.mark.integration

ROWS, EPOCHS = 8, 2
# (method, ranks) -> the check whose run it is
RUNS = {
    ("lora", 1): "llm-lora",  # torch-profiled: torchtune's own profiler
    ("qlora", 1): "llm-qlora",
    ("dpo", 1): "llm-dpo",  # torch-profiled: our profiler extension of the DPO recipes
    ("lora", 2): "multi-llm-fsdp-allgather",
    ("dpo", 2): "llm-dpo-distributed",
    ("qat", 2): "llm-qat-distributed",
}


def check_learns(summary: dict, steps: list, method: str, gpus: int) -> None:
    per_epoch = ROWS // (2 * gpus)  # batch size 2, rows split between ranks
    assert summary["status"] == "ok" and summary["world_size"] == gpus
    assert summary["steps"] == len(steps) == EPOCHS * per_epoch
    assert summary["dataset_rows"] == ROWS and summary["batches_per_epoch"] == per_epoch
    assert summary["recipe"] == recipe_name(method, gpus > 1)
    assert summary["memory_kind"] == "host_peak_rss" and summary["peak_memory_bytes"] > 0
    assert summary["s_per_it"] > 0 and summary["total_time_s"] > 0
    losses = [s["loss"] for s in steps]
    assert all(isinstance(v, float) and math.isfinite(v) for v in losses), losses
    first, second = losses[:per_epoch], losses[per_epoch:]
    # the same batches again, after training on them: the loss must have fallen
    assert sum(second) / len(second) < sum(first) / len(first), losses


@pytest.mark.parametrize(
    "method,gpus", list(RUNS), ids=["lora-1", "qlora-1", "dpo-1", "lora-2ranks", "dpo-2ranks",
                                    "qat-2ranks"]
)  # fmt: skip
def test_method_runs_and_learns(cpu_checks, method, gpus):
    run = cpu_checks[RUNS[method, gpus]]
    spec, summary = run.spec, run.summary()
    assert (spec["method"], spec["gpus"]) == (method, gpus)
    assert (spec["dataset"], spec["template_rows"], spec["epochs"]) == ("error-correction", ROWS,
                                                                         EPOCHS)  # fmt: skip
    assert spec["shuffle"] is False and spec["batch_size"] == 2
    assert (run.run_dir / "torchtune_config.yaml").is_file()
    check_learns(summary, store.read_jsonl(run.run_dir / store.STEPS), method, gpus)
    if method == "dpo":
        assert summary["dataset_tokens"] > 0  # chosen + rejected sequences
    if gpus > 1:
        assert summary["cpu_shims"]  # the distributed recipes needed the CPU shims
    if spec["profiler"] == "torch":
        traces = Path(run.run_dir) / TORCH_TRACE_DIR
        assert list(traces.glob("iteration_*/*.pt.trace.json.gz")), "no torch trace written"
        assert list(traces.glob("iteration_*/rank0_key_averages.txt"))
        # the export's time is the profiler's, not a training step's
        steps = store.read_jsonl(run.run_dir / store.STEPS)
        assert any(r["profiler_s"] > 0 for r in steps) and summary["profiler_s_excluded"] > 0
        timed = steps[summary["warmup_steps_excluded"] :]
        assert summary["s_per_it"] == pytest.approx(
            sum(r["time_s"] - r["profiler_s"] for r in timed) / len(timed)
        )
