"""`make gpu-check`'s check list, run on CPU with gloo ranks so that it cannot rot unnoticed.

On a GPU node `make gpu-check` runs the same CHECKS with their CUDA assertions (make gpu-check;
tests/test_gpu.py is the pytest GPU tier).
"""

from __future__ import annotations

import pytest

from run import gpu_check, probe, store


def test_no_gpu_is_one_line_and_exit_0(monkeypatch, capsys):
    monkeypatch.setattr(probe, "probe", lambda: {"gpu_count": 0, "gpus": [], "gpus_on_node": 0})
    assert gpu_check.main([]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and "no CUDA GPU visible" in out[0]


def test_unusable_gpus_fail_the_check(monkeypatch, capsys):
    monkeypatch.setattr(probe, "probe", lambda: {"gpu_count": 4, "gpus": [], "gpus_on_node": 4})
    monkeypatch.setattr(probe, "cuda_problem", lambda info, b=None: "torch is a CPU build")
    assert gpu_check.main([]) == 1
    assert "torch is a CPU build" in capsys.readouterr().err


def test_every_check_names_a_valid_spec_and_what_it_needs():
    names = [c.name for c in gpu_check.CHECKS]
    assert len(names) == len(set(names)) == 18
    for c in gpu_check.CHECKS:
        spec = gpu_check.spec_of(c, ranks=2)  # validates the spec
        assert c.needs in ("any", "cuda", "multi") and c.expect, c.name
        assert (c.needs == "cuda") == bool(c.cpu_skip), c.name
        assert spec["gpus"] == (2 if c.needs == "multi" or "ddp" in c.name else 1), c.name
    covered = {c.spec.get("precision") for c in gpu_check.CHECKS}
    assert {"fp64", "fp16", "bf16"} <= covered
    assert {c.spec.get("method") for c in gpu_check.CHECKS} >= {"lora", "qlora", "dpo", "qat"}


@pytest.mark.integration
def test_the_check_list_passes_on_cpu(sandbox, monkeypatch):
    """Every check that can run on a CPU passes there; the CUDA-only ones say why they skip."""
    monkeypatch.setenv("LLM_DATA_ROOT", str(sandbox / "llm"))
    info = probe.probe()
    lines: list[str] = []
    records = gpu_check.run_checks(None, info, cuda=False, echo=lines.append)
    assert len(records) == len(gpu_check.CHECKS)
    by_name = {r["check"]: r for r in records}
    skipped = {n for n, r in by_name.items() if r["result"] == "skip"}
    assert skipped == {"vision-oom", "llm-llama3-8b-lora"} | (
        set()
        if probe.max_ranks(info) >= 2
        else {c.name for c in gpu_check.CHECKS if c.needs == "multi"}
    )
    failed = {n: r["problems"] for n, r in by_name.items() if r["result"] == "fail"}
    assert not failed, failed
    assert len(lines) == len(records)
    rr = store.read_json(
        store.run_dir(gpu_check.PROFILE, by_name["vision-ddp-rr"]["run"]) / "summary.json"
    )
    if rr["world_size"] == 2:  # every batch reached rank 0, half of them were trained on
        assert rr["rank0_batches_to_device"] == 8 and rr["rank0_batches_trained"] == 4
