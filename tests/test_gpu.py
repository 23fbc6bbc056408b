"""GPU tier: the same entry points with NCCL and CUDA. Skipped without enough CUDA GPUs.

make test-gpu        # = pytest -m gpu
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import torch

from run import store
from run.checks import cases
from run.llm import launch as llm_launch
from run.llm import spec as llm_spec
from run.node import probe
from run.vision import launch as vision_launch
from run.vision import spec as vision_spec

REPO = Path(__file__).resolve().parent.parent


def gpu_test(count: int):  # noqa: ANN201 - a pytest mark
    """Like torchtune's gpu_test: mark, and skip when fewer than `count` GPUs are visible."""
    have = torch.cuda.device_count()
    return pytest.mark.skipif(have < count, reason=f"needs {count} CUDA GPU(s), {have} visible")


def launch(mod, spec: dict, run_dir: Path) -> subprocess.CompletedProcess:  # noqa: ANN001
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "spec.json").write_text(json.dumps(spec))
    cmd = mod.launch_command(spec, run_dir, probe.probe())
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=900, check=False)


@pytest.mark.gpu
@gpu_test(2)
@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_vision_on_two_gpus_with_nccl(sandbox, precision):
    spec = dict(vision_spec.DEFAULTS, gpus=2, precision=precision, train_images=256, epochs=1)
    proc = launch(vision_launch, vision_spec.canonical(spec), sandbox / "run")
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = store.read_json(sandbox / "run" / store.SUMMARY)
    assert summary["status"] == "ok" and summary["device"] != "cpu"
    assert summary["memory_kind"] == "gpu_max_allocated" and summary["peak_memory_bytes"] > 0
    want = "fp16-autocast+gradscaler" if precision == "fp16" else "fp32"
    assert summary["precision_effective"] == want


@pytest.mark.gpu
@gpu_test(1)
def test_llm_lora_tiny_on_one_gpu_logs_peak_vram(sandbox, monkeypatch):
    monkeypatch.setenv("LLM_DATA_ROOT", str(sandbox / "llm"))
    spec = dict(llm_spec.DEFAULTS, max_steps=6, warmup_steps=1, template_rows=16)
    spec = llm_spec.canonical(dict(spec, dataset="instruct"))
    proc = launch(llm_launch, spec, sandbox / "llm-run")
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = store.read_json(sandbox / "llm-run" / store.SUMMARY)
    assert summary["status"] == "ok" and summary["device"] == "cuda"
    assert summary["memory_kind"] == "gpu_active" and summary["peak_memory_bytes"] > 0


@pytest.mark.gpu
@gpu_test(1)
def test_every_gpu_check_passes(sandbox, monkeypatch):
    """`make gpu-check` as a test: every check of run/checks/runner.py with its CUDA assertions."""
    from run.checks import runner as gpu_check

    monkeypatch.setenv("LLM_DATA_ROOT", str(sandbox / "llm"))
    records = gpu_check.run_checks(None, probe.probe(), cuda=True)
    assert len(records) == len(cases.CHECKS)
    failed = {r["check"]: r["problems"] for r in records if r["result"] == "fail"}
    assert not failed, failed
