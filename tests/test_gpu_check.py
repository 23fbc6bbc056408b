"""`make gpu-check`'s check list, run on CPU with gloo ranks so that it cannot rot unnoticed.

On a GPU node `make gpu-check` runs the same CHECKS with their CUDA assertions (make gpu-check;
tests/test_gpu.py is the pytest GPU tier).
"""

from __future__ import annotations

import json
import os
import re
import tarfile

import pytest
from fake_hw import CPU2

from run import store
from run.checks import cases
from run.checks import runner as gpu_check
from run.node import probe
from run.sweep import failure
from run.sweep import matrix as mx
from run.sweep import runner as sweep
from run.vision import launch as vision_launch


def test_no_gpu_is_one_line_and_exit_0(monkeypatch, capsys):
    monkeypatch.setattr(probe, "probe", lambda: {"gpu_count": 0, "gpus": [], "gpus_on_node": 0})
    assert gpu_check.main([]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and "no CUDA GPU visible" in out[0]


def test_unusable_gpus_fail_the_check(sandbox, monkeypatch, capsys):
    monkeypatch.setattr(probe, "probe", lambda: {"gpu_count": 4, "gpus": [], "gpus_on_node": 4})
    monkeypatch.setattr(probe, "cuda_problem", lambda info, b=None: "torch is a CPU build")
    assert gpu_check.main([]) == 1
    assert "torch is a CPU build" in capsys.readouterr().err


def test_every_check_names_a_valid_spec_and_what_it_needs():
    names = [c.name for c in cases.CHECKS]
    assert len(names) == len(set(names)) == 18
    for c in cases.CHECKS:
        spec = cases.spec_of(c, ranks=2)  # validates the spec
        assert c.needs in ("any", "cuda", "multi") and c.expect, c.name
        assert (c.needs == "cuda") == bool(c.cpu_skip), c.name
        two = c.needs == "multi" or "ddp" in c.name or c.name.endswith("-distributed")
        assert spec["gpus"] == (2 if two else 1), c.name
    # every tiny-model LLM check trains two epochs and asks that the second one's loss fell
    assert all(cases.learns in c.expect for c in cases.CHECKS if c.workload == "llm"
               and c.needs != "cuda")  # fmt: skip
    # on CUDA every check runs a spec of its own; on a CPU only vision-ddp-ds reads another
    # check's run (multi-vision-ddp-allreduce's, the same spec torch-profiled)
    cuda = [mx.run_name(cases.spec_of(c, ranks=2)) for c in cases.CHECKS]
    assert len(set(cuda)) == len(cuda)
    cpu = {c.name: mx.run_name(cases.spec_of(c, ranks=2, cuda=False)) for c in cases.CHECKS}
    assert len(set(cpu.values())) == len(cpu) - 1
    assert cpu["vision-ddp-ds"] == cpu["multi-vision-ddp-allreduce"]
    covered = {c.spec.get("precision") for c in cases.CHECKS}
    assert {"fp64", "fp16", "bf16"} <= covered
    assert {c.spec.get("method") for c in cases.CHECKS} >= {"lora", "qlora", "dpo", "qat"}


@pytest.mark.integration
def test_the_check_list_passes_on_cpu(cpu_checks):
    """Every check that can run on a CPU passes there; the CUDA-only ones say why they skip.
    (The session's runs of the list, tests/real_runs.py: the integration tests read them.)"""
    records = cpu_checks.records
    # in the list's order, one line each, however real_runs split the list into lanes
    assert [r["check"] for r in records] == [c.name for c in cases.CHECKS]
    assert [ln.split()[1].rstrip(":") for ln in cpu_checks.lines] == [c.name for c in cases.CHECKS]
    by_name = {r["check"]: r for r in records}
    skipped = {n for n, r in by_name.items() if r["result"] == "skip"}
    assert skipped == {"vision-oom", "llm-llama3-8b-lora"} | (
        set()
        if probe.max_ranks(cpu_checks.info) >= 2
        else {c.name for c in cases.CHECKS if c.needs == "multi"}
    )
    failed = {n: r["problems"] for n, r in by_name.items() if r["result"] == "fail"}
    assert not failed, failed
    rr = cpu_checks["vision-ddp-rr"].summary()
    if rr["world_size"] == 2:  # every batch reached rank 0, half of them were trained on
        assert rr["rank0_batches_to_device"] == 4 and rr["rank0_batches_trained"] == 2
        # one run, made once, judged by both checks' assertions (both passed above)
        assert by_name["vision-ddp-ds"]["run"] == by_name["multi-vision-ddp-allreduce"]["run"]


def test_a_side_lane_that_dies_leaves_each_of_its_checks_failed_with_its_log(sandbox):
    """cpu_checks runs the one-rank LLM checks in a second process (tests/real_runs.py): a check
    that process leaves without a record is that check's failure, with the lane's last lines
    (here run_checks refuses a check it does not know, before running anything)."""
    import real_runs  # tests/ is on sys.path for the test modules (pytest rootdir)

    lane = real_runs.Lane(["no-such-check"], real_runs.gloo_machine(), sandbox / "lane")
    ((rec, line),) = lane.finish()
    assert rec["check"] == "no-such-check" and rec["result"] == "fail" and rec["run"] is None
    (why,) = rec["problems"]
    assert why.startswith("the side lane (exit status 1) left no record: ")
    assert "unknown check(s): no-such-check" in why
    assert line == f"FAIL no-such-check: {why}"


def test_learns_wants_two_whole_epochs_and_a_lower_second_one(tmp_path):
    def seen(losses: list[float], per_epoch: int = 2) -> list[str]:
        (tmp_path / store.STEPS).write_text(
            "".join(json.dumps({"step": i, "loss": v}) + "\n" for i, v in enumerate(losses))
        )
        return cases.learns(cases.Seen({"batches_per_epoch": per_epoch}, tmp_path, False, 1))

    assert seen([3.0, 2.5, 2.0, 1.5]) == []
    assert "did not fall" in seen([2.0, 1.5, 2.0, 1.6])[0]
    assert "expected two epochs of 2" in seen([3.0, 2.5, 2.0])[0]
    assert "expected two epochs of 0" in seen([3.0, 2.0], per_epoch=0)[0]
    assert "not a finite number" in seen([3.0, float("nan"), 2.0, 1.0])[0]


# --- each check isolated; the summary line; the bundle (all on CPU, with a fake execute) ---------


def _boom(seen: cases.Seen) -> list[str]:
    raise AssertionError("an assertion that crashed")


FAKE_CHECKS = [
    cases.Check("crashes-in-execute", "vision", {"precision": "fp64"}, "execute raises"),
    cases.Check("no-data", "vision", {"precision": "fp16"}, "preflight fails"),
    cases.Check("bad-spec", "vision", {"precision": "fp8"}, "validate raises"),
    cases.Check("assertion-raises", "vision", {"precision": "bf16"}, "one", expect=[_boom]),
    cases.Check("run-fails", "vision", {"pin_memory": True}, "the run fails"),
    cases.Check("passes", "vision", {}, "all is well", expect=[lambda s: []]),
    cases.Check("gpu-only", "vision", {"image_size": 40}, "never here", needs="cuda",
                    cpu_skip="no GPU here"),
]  # fmt: skip


def _fake_execute(spec, scale, info, matrix):  # noqa: ANN001, ANN202
    """What sweep.execute leaves, without a process: a published run with its log and summary."""
    name = mx.run_name(spec)
    run = store.run_dir(scale, name)
    run.mkdir(parents=True)
    if spec["precision"] == "fp64":
        raise RuntimeError("CUDA error: an illegal memory access was encountered")
    ok = not spec["pin_memory"]
    log = [f"step {i}" for i in range(80)] + ([] if ok else ["ValueError: loss is nan"])
    (run / store.LOG).write_text("\n".join(log) + "\n")
    summary = {"name": name, "status": "ok" if ok else "failed"}
    if not ok:
        summary["error"] = failure.root_cause((run / store.LOG).read_text(), 1)
    store.write_json_atomic(run / store.SUMMARY, summary)
    return summary


def _no_data(specs):  # noqa: ANN001, ANN202
    if any(s["precision"] == "fp16" for s in specs):
        raise FileNotFoundError("MNIST not found under /nowhere")


@pytest.fixture
def fake_checks(sandbox, monkeypatch):
    monkeypatch.setattr(cases, "CHECKS", FAKE_CHECKS)
    monkeypatch.setattr(sweep, "execute", _fake_execute)
    monkeypatch.setattr(vision_launch, "preflight", _no_data)
    return sandbox


def test_a_check_that_raises_never_stops_the_next(fake_checks):
    lines: list[str] = []
    records = gpu_check.run_checks(None, dict(CPU2), cuda=False, echo=lines.append)
    got = {r["check"]: r for r in records}
    assert [r["check"] for r in records] == [c.name for c in FAKE_CHECKS]
    assert {n: r["result"] for n, r in got.items()} == {
        "crashes-in-execute": "fail",
        "no-data": "fail",
        "bad-spec": "fail",
        "assertion-raises": "fail",
        "run-fails": "fail",
        "passes": "pass",
        "gpu-only": "skip",
    }
    cause = {n: r.get("root_cause") for n, r in got.items()}
    assert cause["crashes-in-execute"] == (
        "RuntimeError: CUDA error: an illegal memory access was encountered"
    )
    assert cause["no-data"] == "FileNotFoundError: MNIST not found under /nowhere"
    assert "fp8" in cause["bad-spec"]
    assert cause["assertion-raises"] == "AssertionError: an assertion that crashed"
    assert cause["run-fails"] == "ValueError: loss is nan" and cause["passes"] is None
    assert "Traceback" in got["crashes-in-execute"]["traceback"]
    assert len(lines) == len(FAKE_CHECKS)
    assert lines[0].startswith("FAIL crashes-in-execute (") and "crashed: RuntimeError" in lines[0]
    assert gpu_check.counts(records, 61.4) == "gpu-check: 1 passed, 5 failed, 1 skipped in 61 s"


def test_gpu_check_on_a_gpu_node_writes_its_bundle(fake_checks, monkeypatch, capsys):
    gpu = {**CPU2, "gpu_count": 1, "gpu_model": "NVIDIA H100", "gpus_on_node": 1,
           "gpus": [{"index": 0, "name": "NVIDIA H100", "driver": "580.65.06"}]}  # fmt: skip
    monkeypatch.setattr(probe, "probe", lambda: gpu)
    monkeypatch.setattr(probe, "cuda_problem", lambda info, b=None: None)
    assert gpu_check.main([]) == 1
    out = capsys.readouterr().out.strip().splitlines()
    assert re.fullmatch(r"gpu-check: 2 passed, 5 failed, 0 skipped in \d+ s", out[-1])
    path = store.scale_dir(gpu_check.SCALE) / "bundle.tar.gz"
    assert out[-2] == f"gpu-check: attach {path} to a report (README: 'Checking a GPU node')"
    with tarfile.open(path) as tar:
        got = {m.name: tar.extractfile(m).read().decode() for m in tar.getmembers()}
    report = store.read_json(store.scale_dir(gpu_check.SCALE) / gpu_check.REPORT)
    assert json.loads(got["bundle/gpu_check.json"]) == report
    assert report["result"] == out[-1] and report["versions"]["driver"] == "580.65.06"
    assert got["bundle/gpu_check.txt"].splitlines()[-1] == out[-1]
    assert {"bundle/probe.txt", "bundle/versions.json"} <= set(got)
    runs = {r["name"]: r for r in json.loads(got["bundle/runs.json"])}
    assert runs["run-fails"]["root_cause"] == "ValueError: loss is nan"
    tail = got["bundle/" + runs["run-fails"]["log"]].splitlines()
    assert len(tail) == 60 and tail[-1] == "ValueError: loss is nan"
    assert "illegal memory access" in got["bundle/" + runs["crashes-in-execute"]["log"]]
    assert runs["gpu-only"]["result"] == "pass" and runs["bad-spec"]["log"] is not None


def test_an_interrupted_gpu_check_bundles_what_finished(fake_checks, monkeypatch, capsys):
    import signal

    gpu = {**CPU2, "gpu_count": 1, "gpu_model": "NVIDIA H100", "gpus_on_node": 1}
    monkeypatch.setattr(probe, "probe", lambda: gpu)
    monkeypatch.setattr(probe, "cuda_problem", lambda info, b=None: None)
    monkeypatch.setenv("RUN_TIMEOUT_S", "")  # unset for the check runner; restored afterwards
    monkeypatch.setattr(signal, "signal", lambda *a: None)  # keep pytest's own handlers

    def stop_at_the_passing_one(spec, *args, **kw):  # noqa: ANN001, ANN002, ANN003, ANN202
        assert os.environ["RUN_TIMEOUT_S"] == str(gpu_check.CHECK_TIMEOUT_S)  # a hang times out
        if spec["precision"] == "fp32" and not spec["pin_memory"]:
            raise KeyboardInterrupt  # Ctrl-C, or SIGTERM from SLURM (_interrupt)
        return _fake_execute(spec, *args, **kw)

    monkeypatch.setattr(sweep, "execute", stop_at_the_passing_one)
    assert gpu_check.main([]) == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].endswith("(interrupted: the rest did not run)"), err
    report = store.read_json(store.scale_dir(gpu_check.SCALE) / gpu_check.REPORT)
    done = [r["check"] for r in report["checks"]]
    assert done and "passes" not in done and report["result"] == err[-1]
    assert (store.scale_dir(gpu_check.SCALE) / "bundle.tar.gz").is_file()
    with pytest.raises(KeyboardInterrupt):
        gpu_check._interrupt(15, None)


def test_unusable_gpus_still_leave_a_bundle(sandbox, monkeypatch, capsys):
    monkeypatch.setattr(probe, "probe", lambda: {**CPU2, "gpu_count": 4, "gpus_on_node": 4})
    monkeypatch.setattr(probe, "cuda_problem", lambda info, b=None: "torch is a CPU build")
    assert gpu_check.main([]) == 1
    assert capsys.readouterr().err.strip() == "gpu-check: FAIL: torch is a CPU build"
    with tarfile.open(store.scale_dir(gpu_check.SCALE) / "bundle.tar.gz") as tar:
        report = json.load(tar.extractfile("bundle/gpu_check.json"))
    assert report["result"] == "gpu-check: FAIL: torch is a CPU build" and report["checks"] == []
