"""run/node/profiling.py and profilers.py: the nsys command line, the window, the no-op twin, the post-run metrics.

nsys is not installed on our machines: its command line is checked here as data, and the
capture-range calls are checked against a stand-in for torch.cuda.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import pytest

from run import store
from run.llm import launch as llm_launch
from run.llm import spec as llm_spec
from run.node import profilers, profiling
from run.sweep import matrix as mx
from run.sweep import runner as sweep
from run.vision import launch as vision_launch
from run.vision import spec as vision_spec

REPO = Path(__file__).resolve().parent.parent
WINDOW = {"wait_steps": 1, "warmup_steps": 1, "active_steps": 2, "max_seconds": 0}


def plan(run_dir: Path, profiler: str, **window) -> None:
    profiling.write_plan(run_dir, {"profiler": profiler}, {**WINDOW, **window})


def vision(**kw) -> dict:
    return {**vision_spec.DEFAULTS, "gpus": 2, **kw}


# --- the nsys command line ------------------------------------------------------------------------


def test_nsys_wraps_every_torchrun_rank_with_capture_range(tmp_path: Path) -> None:
    plan(tmp_path, "nsys")
    spec = vision(profiler="nsys")
    cmd = vision_launch.launch_command(spec, tmp_path, {"nsys": "/usr/bin/nsys", "gpu_count": 2})
    i = cmd.index("--no-python")
    assert cmd[i - 2 : i] == ["--standalone", "--nproc_per_node=2"]
    assert cmd[i + 1 : i + 3] == ["nsys", "profile"]
    assert "--trace=cuda,nvtx,osrt,cudnn,cublas" in cmd
    assert "--capture-range=cudaProfilerApi" in cmd and "--capture-range-end=stop" in cmd
    assert f"--output={tmp_path}/nsys/rank%q{{RANK}}" in cmd  # one report per rank
    prog = cmd.index(sys.executable)
    assert prog > cmd.index("nsys")
    assert cmd[prog + 1 : prog + 3] == ["-m", "run.vision"]
    assert cmd[-2:] == ["--run-dir", str(tmp_path)]
    assert not any(a.startswith("--duration") for a in cmd)


def test_nsys_single_process_llm_uses_duration_window(tmp_path: Path) -> None:
    plan(tmp_path, "nsys", max_seconds=720)
    spec = {**llm_spec.DEFAULTS, "profiler": "nsys", "gpus": 1}
    cmd = llm_launch.launch_command(spec, tmp_path, {"nsys": "/usr/bin/nsys"})
    assert cmd[:2] == ["nsys", "profile"]
    assert "--duration=720" in cmd and f"--output={tmp_path}/nsys/rank0" in cmd
    assert "--capture-range=cudaProfilerApi" not in cmd
    assert cmd[cmd.index(sys.executable) + 1 :][:2] == ["-m", "run.llm.tune"]


def test_nsys_llm_torchrun_per_rank(tmp_path: Path) -> None:
    plan(tmp_path, "nsys")  # max_seconds 0: no --duration, the whole run
    spec = {**llm_spec.DEFAULTS, "profiler": "nsys", "gpus": 2, "method": "dpo"}
    cmd = llm_launch.launch_command(spec, tmp_path, {"nsys": "/usr/bin/nsys"})
    assert "--no-python" in cmd and f"--output={tmp_path}/nsys/rank%q{{RANK}}" in cmd
    assert not any(a.startswith("--duration") for a in cmd)


def test_no_nsys_when_profiler_is_torch_or_none(tmp_path: Path) -> None:
    for p in ("torch", "none"):
        cmd = vision_launch.launch_command(vision(profiler=p), tmp_path, {"nsys": None})
        assert "nsys" not in cmd


def test_profiler_nsys_without_nsys_is_one_clear_error() -> None:
    with pytest.raises(mx.MatrixError, match="PROFILER=nsys but nsys is not on the PATH"):
        mx.resolve_profiler(vision(profiler="auto"), "nsys", {"nsys": None})
    assert mx.resolve_profiler(vision(profiler="auto"), None, {"nsys": None})["profiler"] == "torch"
    assert (
        mx.resolve_profiler(vision(profiler="auto"), None, {"nsys": "/x/nsys"})["profiler"]
        == "nsys"
    )
    assert mx.resolve_profiler(vision(profiler="torch"), "none", {})["profiler"] == "none"


def test_sweep_with_profiler_nsys_stops_before_any_run(sandbox, monkeypatch, capsys) -> None:
    from run.node import probe

    monkeypatch.setattr(probe, "probe", lambda: {**_info(), "nsys": None})
    monkeypatch.setenv("PROFILER", "nsys")
    assert sweep.main(["--scale", "test", "--exp", "V3"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nsys is not on the PATH" in err[0]
    assert not store.runs_dir("test").exists() and not store.sweeps_dir("test").exists()


def _info() -> dict:
    return {"gpu_count": 0, "gpu_model": None, "cpu_count": 2, "affinity_cpus": 2, "nsys": None}


# --- the window ------------------------------------------------------------------------------------


def test_window_checked_against_the_run() -> None:
    # a window longer than the run is fitted to it, and says why (it used to be refused)
    fitted, why = profiling.fit_window(WINDOW, 3, "torch")
    assert sum(fitted[k] for k in ("wait_steps", "warmup_steps", "active_steps")) <= 3
    assert why and "the run has 3 steps, the window asked for 4" in why[0]
    exact, none = profiling.fit_window(WINDOW, 4, "torch")
    assert exact["active_steps"] == 2 and none == []
    assert profiling.fit_window({**WINDOW, "active_steps": 0}, 1, "nsys")[0]["active_steps"] == 1
    with pytest.raises(profiling.ProfilingError, match="unknown profiling window key"):
        profiling.check_window({"active": 3})
    with pytest.raises(profiling.ProfilingError, match="wait_steps"):
        profiling.check_window({"wait_steps": -1})


def test_every_matrix_profile_has_valid_windows() -> None:
    m = mx.load_matrix()
    for prof in m["scales"]:
        for workload in ("vision", "llm"):
            assert m["scales"][prof]["profiling"][workload]  # data, not code defaults
            profiling.window_for(prof, workload, m)
    assert profiling.window_for("paper", "llm", m)["max_seconds"] == 720  # the paper's window


def test_none_is_a_no_op(tmp_path: Path) -> None:
    prof = profilers.profiler_for(vision(profiler="none"), tmp_path, 0)
    with prof:
        prof.step()
    assert isinstance(prof, profilers.NoProfiler) and not any(tmp_path.iterdir())


class FakeCuda:
    """Records what NsysProfiler asks of torch.cuda."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        fake = self

        class _P:
            def start(self) -> None:
                fake.calls.append("start")

            def stop(self) -> None:
                fake.calls.append("stop")

        class _N:
            def range_push(self, name: str) -> None:
                fake.calls.append(f"push {name}")

            def range_pop(self) -> None:
                fake.calls.append("pop")

        self.profiler, self.nvtx = _P(), _N()

    def synchronize(self) -> None:
        pass


def test_nsys_capture_range_opens_after_warmup_and_closes_after_active() -> None:
    prof = profilers.NsysProfiler(dict(WINDOW))
    prof.cuda = FakeCuda()
    with prof:
        for _ in range(8):
            prof.step()
    calls = prof.cuda.calls
    assert calls == ["start", "push step 2", "pop", "push step 3", "pop", "stop"]


def test_nsys_capture_range_closes_on_time_limit(monkeypatch) -> None:
    clock = iter(range(0, 1000, 10))
    monkeypatch.setattr(profilers.time, "monotonic", lambda: next(clock))
    prof = profilers.NsysProfiler({**WINDOW, "active_steps": 0, "max_seconds": 15})
    prof.cuda = FakeCuda()
    with prof:
        for _ in range(10):
            prof.step()
    assert prof.cuda.calls.count("start") == 1 and prof.cuda.calls[-1] == "stop"
    assert prof.cuda.calls.count("push step 3") == 1 and "push step 4" not in prof.cuda.calls


def test_torch_profiler_records_exactly_the_window(tmp_path: Path) -> None:
    import torch

    from analysis.profiles.torch_trace import read_torch_trace

    plan(tmp_path, "torch")
    prof = profilers.profiler_for(vision(profiler="torch"), tmp_path, 3, steps=6)
    with prof:
        for _ in range(6):
            torch.ones(64, 64) @ torch.ones(64, 64)
            prof.step()
    trace = tmp_path / "torch_traces" / "rank3.pt.trace.json.gz"
    rows = {r.metric: r for r in read_torch_trace(trace).rows}
    assert rows["cpu:ProfilerStep"].calls == 2  # active steps only, warm-up discarded
    assert rows["cpu:aten::mm"].calls == 2


def test_torch_profiler_times_its_trace_writing_and_nothing_else(tmp_path: Path) -> None:
    # an H200 check ran 1.75 s profiled against 0.62 s unprofiled: the trace written as the window
    # closes is the profiler's time, which the run's times leave out (run/vision/loop.py)
    import torch

    plan(tmp_path, "torch")
    prof = profilers.profiler_for(vision(profiler="torch"), tmp_path, 0, steps=6)
    seen = []
    with prof:
        for _ in range(6):
            torch.ones(64, 64) @ torch.ones(64, 64)
            prof.step()
            seen.append(prof.seconds)
    # window wait 1, warm-up 1, active 2: written at step 4, untimed steps before it
    assert seen[:3] == [0.0, 0.0, 0.0] and seen[3] > 0 and seen[3:] == [seen[3]] * 3
    assert (tmp_path / "torch_traces" / "rank0.pt.trace.json.gz").is_file()
    assert profilers.NoProfiler().seconds == 0.0


# --- after the run: profile_metrics.csv or a failed run -------------------------------------------


def test_corrupt_trace_fails_the_run_with_one_line(tmp_path: Path) -> None:
    traces = tmp_path / "torch_traces"
    traces.mkdir()
    good = gzip.compress(json.dumps({"traceEvents": [{"ph": "X", "ts": 1, "dur": 2}]}).encode())
    (traces / "rank0.pt.trace.json.gz").write_bytes(good[: len(good) // 2])
    out = sweep.profile_metrics(vision(profiler="torch"), tmp_path, {"status": "ok"})
    assert out["status"] == "failed" and "\n" not in out["error"]
    assert out["error"].startswith(f"profile: {traces / 'rank0.pt.trace.json.gz'}: ")
    assert not (tmp_path / profiling.PROFILE_METRICS).exists()


def test_missing_trace_fails_the_run(tmp_path: Path) -> None:
    out = sweep.profile_metrics(vision(profiler="torch"), tmp_path, {"status": "ok"})
    assert out["status"] == "failed" and "no torch profile was written" in out["error"]


def test_unprofiled_or_failed_runs_are_left_alone(tmp_path: Path) -> None:
    assert sweep.profile_metrics(vision(), tmp_path, {"status": "ok"}) == {"status": "ok"}
    failed = {"status": "failed", "error": "x"}
    assert sweep.profile_metrics(vision(profiler="torch"), tmp_path, failed) == failed


@pytest.mark.integration
def test_real_two_rank_cpu_run_gives_per_rank_metrics(cpu_checks) -> None:
    """run.vision under torchrun with 2 gloo ranks and torch.profiler, then the sweep's step:
    gpu-check's multi-vision-ddp-allreduce check (the session's run, tests/real_runs.py)."""
    from analysis.profiles.metrics import read_metrics_rows

    run = cpu_checks["multi-vision-ddp-allreduce"]
    assert run.spec["profiler"] == "torch" and run.spec["gpus"] == 2
    assert run.summary()["status"] == "ok"
    rows = read_metrics_rows(run.run_dir / profiling.PROFILE_METRICS)
    assert sorted({r.rank for r in rows}) == [0, 1] and {r.source for r in rows} == {"torch"}
    for rank in (0, 1):
        mine = {r.metric for r in rows if r.rank == rank}
        assert "cpu:gloo:all_reduce" in mine  # gloo allreduce of DDP's gradients
        assert not any(m.startswith(("cuda", "memcpy", "nccl")) for m in mine)  # absent, not 0
    # the trace written as the window closed is in one step, and left out of the run's times
    summary = run.summary()
    timeline = store.read_jsonl(store.timeline_file(run.run_dir, 0))
    wrote = [r["profiler_s"] for r in timeline if "profiler_s" in r]
    # the summary keeps 3 decimals
    assert len(wrote) == 1 and summary["profiler_s"] >= round(wrote[0], 3) > 0
    assert summary["train_time_s"] < summary["total_time_s"]


def test_bench_profiler_runs_and_reports_each_profiler(capsys) -> None:
    from run.bench import profiler as bench_profiler

    assert (
        bench_profiler.main(["--size", "32", "--batch-size", "2", "--steps", "2", "--repeats", "1"])
        == 0
    )
    out = capsys.readouterr().out.splitlines()
    torch_row = next(line for line in out if line.startswith("torch "))
    assert float(torch_row.split()[2]) > -100.0  # an overhead % was computed from real timings
    assert any(line.startswith("nsys") and "not measured" in line for line in out)
