"""Issue 9 on a CPU: the GPU path's decisions, checked without a GPU.

nsys's command line, profiling windows that fit their runs, bounded run lengths, GPUs that torch
cannot use, GPU counts under CUDA_VISIBLE_DEVICES and SLURM, one-line errors before any run, the
root cause of a failed run, last-step peak memory, the tokenizer in run names, where random
weights are made, and the process group's life in each entry point.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from run import store
from run.llm import spec as llm_spec
from run.node import probe as hw
from run.node import profilers, profiling, toolchain
from run.sweep import failure
from run.sweep import matrix as mx
from run.sweep import runner as sweep
from run.sweep.workloads import WORKLOADS
from run.vision import launch as vision_launch
from run.vision import spec as vision_spec

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).parent))
from fake_hw import CPU2  # noqa: E402

LOGS = Path(__file__).with_name("logs")


# --- 1. nsys never ends the application when its window closes ----------------------------------


@pytest.mark.parametrize("workload, gpus", [("vision", 2), ("llm", 1), ("llm", 2)])
def test_nsys_is_told_not_to_kill_the_run(tmp_path, workload, gpus):
    profiling.write_plan(tmp_path, {"profiler": "nsys"}, {"max_seconds": 720})
    wl = WORKLOADS[workload]
    spec = {**wl.defaults, "profiler": "nsys", "gpus": gpus}
    cmd = wl.launch_command(spec, tmp_path, {"nsys": "/usr/bin/nsys"})
    nsys_args = cmd[cmd.index("profile") : cmd.index(sys.executable)]
    assert "--kill=none" in nsys_args
    if workload == "llm":
        assert "--duration=720" in nsys_args  # the window that would otherwise SIGTERM the run


# --- 2. every run has a bounded, known length --------------------------------------------------------


def test_every_run_of_every_profile_has_a_bounded_planned_length():
    m = mx.load_matrix()
    checked = 0
    for scale in mx.scales(m):
        for exp_id in m["experiments"]:
            for spec in mx.expand(exp_id, scale, m).specs:
                mod = WORKLOADS[spec["workload"]]
                steps = mod.planned_steps(spec)
                assert 0 < steps <= llm_spec.MAX_PLANNED_STEPS, (exp_id, scale, steps)
                checked += 1
    assert checked > 500


def test_the_papers_profiled_llm_runs_are_bounded_to_cover_720_s():
    for exp_id in ("L3", "L4"):
        for spec in mx.expand(exp_id, "paper").specs:
            assert spec["max_steps"] == 1200
            assert llm_spec.planned_steps(spec) == 1200
            # 1200 steps at the paper's 0.77 s/it (Table 5) outlast the 720 s window
            assert 1200 * 0.77 > 720


def test_an_unbounded_epoch_is_refused_with_one_line():
    m = copy.deepcopy(mx.load_matrix())
    m["experiments"]["L3"]["fixed"]["max_steps"] = 0
    with pytest.raises(mx.MatrixError, match=r"92,500,000 steps planned .* set max_steps"):
        mx.expand("L3", "paper", m)


def test_llm_planned_steps_follow_torchtunes_sampler_and_drop_last():
    spec = llm_spec.canonical({**llm_spec.DEFAULTS, "dataset": "instruct", "template_rows": 500})
    assert llm_spec.planned_steps({**spec, "gpus": 1}) == 250
    assert llm_spec.planned_steps({**spec, "gpus": 4}) == 62  # 125 rows per rank, batch 2
    assert llm_spec.planned_steps({**spec, "gpus": 3}) == 83  # ceil(500 / 3) = 167 rows
    assert llm_spec.planned_steps({**spec, "gpus": 4, "max_steps": 10}) == 10


# --- 3, 4. the profiling window fits the run and Kineto ------------------------------------------


def test_a_window_longer_than_the_run_is_clamped_and_says_why():
    # L7 on 4 GPUs in the paper scale: 62 steps, the timings leave out 15, the window 20
    window = {"wait_steps": 100, "warmup_steps": 1, "active_steps": 20, "max_seconds": 720}
    fitted, why = profiling.fit_window(window, 62, "torch")
    assert fitted["wait_steps"] + fitted["warmup_steps"] + fitted["active_steps"] <= 62
    assert fitted["active_steps"] == 20 and fitted["wait_steps"] == 15
    assert why and "the run has 62 steps" in why[0]
    same, none = profiling.fit_window({**window, "wait_steps": 5}, 62, "torch")
    assert none == [] and same["wait_steps"] == 5


def test_a_tiny_run_still_gets_a_window_that_closes():
    for steps in (1, 2, 3, 7):
        fitted, _ = profiling.fit_window({"wait_steps": 10, "active_steps": 50}, steps, "nsys")
        total = fitted["wait_steps"] + fitted["warmup_steps"] + fitted["active_steps"]
        assert fitted["active_steps"] >= 1 and total <= steps


def test_torch_profiler_never_records_a_whole_long_run():
    """The paper's vision window is the whole run (nsys): torch.profiler gets a bounded one."""
    m = mx.load_matrix()
    window = profiling.window_for("paper", "vision", m)
    assert window["active_steps"] == 0  # nsys: the whole run, as the paper's profiles
    steps = vision_spec.planned_steps(mx.expand("V6", "paper", m).specs[0])
    assert steps > 4000  # 20 epochs
    fitted, why = profiling.fit_window(window, steps, "torch")
    assert fitted["active_steps"] == window["torch_max_active_steps"] == 200
    assert any("Kineto" in w for w in why)
    whole, _ = profiling.fit_window(window, steps, "nsys")
    assert whole["active_steps"] == steps  # nsys keeps the whole run


def test_profiler_for_records_the_window_it_used(tmp_path):
    profiling.write_plan(tmp_path, {"profiler": "torch"}, {"wait_steps": 9, "active_steps": 9})
    spec = {**vision_spec.DEFAULTS, "profiler": "torch"}
    prof = profilers.profiler_for(spec, tmp_path, rank=0, steps=6)
    assert prof.window["wait_steps"] + prof.window["active_steps"] <= 6
    plan = store.read_json(tmp_path / profiling.PROFILING_PLAN)
    assert plan["wait_steps"] == 9  # what was asked stays
    assert plan["effective"]["active_steps"] == prof.window["active_steps"]
    assert plan["run_steps"] == 6 and plan["clamped"] is True and plan["clamp_reasons"]


def test_llm_profiler_block_is_fitted_to_planned_steps(tmp_path):
    from run.llm import config as llm_config

    profiling.write_plan(tmp_path, {"profiler": "torch"}, {"wait_steps": 0, "active_steps": 20})
    spec = llm_spec.canonical(
        {**llm_spec.DEFAULTS, "profiler": "torch", "dataset": "instruct", "template_rows": 16}
    )
    block = llm_config.profiler_block({**spec, "gpus": 2}, tmp_path, cuda=False)
    steps = llm_spec.planned_steps({**spec, "gpus": 2})
    assert steps == 4
    assert block["wait_steps"] + block["warmup_steps"] + block["active_steps"] <= steps
    assert block["xpu"] is False  # torchtune defaults it on, and torch warns on every run


# --- 5. GPUs that torch cannot use stop everything, with one line ------------------------------------

NODE = {
    "gpu_count": 4,
    "gpu_model": "NVIDIA H100 80GB HBM3",
    "gpus": [{"driver": "535.104.05"}],
    "driver_cuda": "12.2",
    "gpus_on_node": 4,
}


@pytest.mark.parametrize(
    "build, expect",
    [
        ({"version": "2.13.0+cpu", "cuda": None, "available": False}, "is a CPU build"),
        ({"version": "2.13.0", "cuda": "13.0", "available": False}, "built for CUDA 13.0, newer"),
        ({"version": "2.13.0+cu121", "cuda": "12.1", "available": False}, "cannot initialise"),
    ],
)
def test_unusable_cuda_is_named_in_one_line(build, expect):
    line = hw.cuda_problem(NODE, build)
    assert line and "\n" not in line and expect in line
    assert "4 x NVIDIA H100" in line and "535.104.05" in line and "CUDA up to 12.2" in line
    assert "TORCH_INDEX=" in line  # what to do


CPU_TORCH = {"version": "2.13.0+cpu", "cuda": None, "available": False}


@pytest.mark.parametrize(
    "driver, driver_cuda, build, says",
    [
        ("580.65.06", "13.0", "cu130", "`make venv TORCH_INDEX=` or"),
        ("590.44.01", "13.1", "cu130", "/whl/cu130`"),
        ("570.124.06", "12.8", "cu128", "TORCH_INDEX=https://download.pytorch.org/whl/cu128`"),
        ("575.57.08", "12.9", "cu128", "/whl/cu128`"),
        ("560.35.03", "12.6", "cu126", "/whl/cu126`"),
        ("550.54.15", "12.4", "cu126", "/whl/cu126`"),
        ("535.104.05", "12.2", "cu126", "/whl/cu126`"),  # CUDA 12.x minor-version compatibility
        ("525.60.13", "12.0", "cu126", "/whl/cu126`"),
        ("470.256.02", "11.4", "", "too old for torch 2.13"),
        (None, "12.8", "cu128", "/whl/cu128`"),  # no driver version: nvidia-smi's CUDA Version
        (None, "11.8", "", "too old for torch 2.13"),
        (None, None, None, "one of cu130 (driver 580+), cu128 (driver 570+), cu126 (driver 525+)"),
    ],
)
def test_the_suggested_torch_build_follows_the_driver(driver, driver_cuda, build, says):
    assert hw.torch_build_for(driver, driver_cuda) == build
    node = {**NODE, "gpus": [{"driver": driver}], "driver_cuda": driver_cuda}
    line = hw.cuda_problem(node, CPU_TORCH)
    assert line and "\n" not in line and says in line
    others = {"cu126", "cu128", "cu130"} - {build}
    if build:  # one build is named, never the others
        assert not any(f"/whl/{b}" in line for b in others)
    if build == "":
        assert "update the NVIDIA driver" in line and "/whl/" not in line


def test_the_right_build_that_still_fails_is_not_told_to_reinstall():
    node = {**NODE, "gpus": [{"driver": "570.124.06"}], "driver_cuda": "12.8"}
    line = hw.cuda_problem(node, {"version": "2.13.0+cu128", "cuda": "12.8", "available": False})
    assert "cu128 build is the one this driver runs" in line and "TORCH_INDEX" not in line


def test_usable_cuda_or_no_gpu_is_no_problem():
    assert hw.cuda_problem(NODE, {"version": "2.13.0", "cuda": "12.1", "available": True}) is None
    assert hw.cuda_problem({**NODE, "gpu_count": 0}, None) is None  # torch is not even read


def test_a_sweep_on_a_gpu_node_with_a_cpu_torch_stops_before_any_run(sandbox, monkeypatch, capsys):
    monkeypatch.setattr(hw, "probe", lambda: {**_cpu_info(), **NODE})
    monkeypatch.setattr(
        hw,
        "cuda_problem",
        lambda info, b=None: "nvidia-smi lists 4 x H100 but torch is a CPU build",
    )
    assert sweep.main(["--scale", "test", "--exp", "V3"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: nvidia-smi lists 4 x H100 but torch is a CPU build"]
    assert not store.runs_dir("test").exists()


def test_a_gpu_profile_never_trains_on_a_cpu(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(hw, "probe", _cpu_info)
    monkeypatch.setenv("RESULTS_DIR", str(tmp_path))
    for scale in ("quick", "paper"):
        assert sweep.main(["--scale", scale, "--exp", "V3"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"scale '{scale}' runs on CUDA GPUs" in err[0]
    assert not any(tmp_path.iterdir())


def test_llm_entry_point_refuses_unusable_gpus_with_one_line(monkeypatch, tmp_path, capsys):
    from run.llm import tune as llm_tune

    monkeypatch.setattr(hw, "probe", lambda: {**_cpu_info(), **NODE})
    monkeypatch.setattr(hw, "cuda_problem", lambda info, b=None: "torch is a CPU build")
    monkeypatch.setenv("LLM_DATA_ROOT", str(tmp_path / "llm"))
    run = tmp_path / "run"
    run.mkdir()
    (run / "spec.json").write_text(json.dumps({**llm_spec.DEFAULTS, "dataset": "instruct",
                                               "template_rows": 8}))  # fmt: skip
    assert llm_tune.main(["--run-dir", str(run)]) == 2
    assert capsys.readouterr().err.strip() == "error: torch is a CPU build"
    assert sorted(p.name for p in run.iterdir()) == ["spec.json"]


def test_each_rank_checks_cuda_without_the_whole_probe(monkeypatch):
    def no_probe():  # noqa: ANN202
        raise AssertionError("check_cuda ran the whole probe")

    monkeypatch.setattr(hw, "probe", no_probe)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(hw, "gpus", no_probe)  # CUDA works: not even nvidia-smi
    hw.check_cuda()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(hw, "gpus", lambda: FOUR)
    monkeypatch.setattr(hw, "driver_cuda", lambda: "12.2")
    with pytest.raises(hw.CudaUnusable, match="nvidia-smi lists 4 x H100"):
        hw.check_cuda()


def test_probe_check_cuda_exits_2_with_one_line(monkeypatch, capsys):
    monkeypatch.setattr(hw, "probe", lambda: {**_cpu_info(), **NODE})
    monkeypatch.setattr(hw, "cuda_problem", lambda info, b=None: "torch is a CPU build")
    assert hw.main(["--check-cuda"]) == 2
    assert capsys.readouterr().err.strip() == "error: torch is a CPU build"


def _cpu_info() -> dict:
    return dict(CPU2)


# --- 6. one variable chooses the torch build, for the venv and both container recipes ----------------


def test_torch_index_is_one_variable_used_by_make_and_both_recipes():
    install = (REPO / "container" / "install-python.sh").read_text()
    assert "TORCH_INDEX" in install and "requirements.txt" in install
    make = (REPO / "Makefile").read_text()
    assert "TORCH_INDEX ?=" in make and "container/install-python.sh" in make
    for recipe in ("Containerfile", "apptainer.def"):
        text = (REPO / recipe).read_text()
        assert "TORCH_INDEX" in text and "setup-image.sh" in text, recipe
    setup = (REPO / "container" / "setup-image.sh").read_text()
    assert "install-python.sh" in setup
    pins = (REPO / "container" / "pins.env").read_text()
    assert "\nTORCH_INDEX=" in pins
    # torch's own pin stays in requirements.txt only
    for text in (install, make):
        assert "torch==" not in text


def test_install_script_takes_torch_from_the_index_first(tmp_path):
    """Run the script with a fake pip that records its calls."""
    pip_log = tmp_path / "pip.log"
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    fake = venv / "bin" / "pip"
    fake.write_text(f'#!/bin/sh\necho "$@" >> {pip_log}\n')
    fake.chmod(0o755)
    env = dict(os.environ, TORCH_INDEX="https://download.pytorch.org/whl/cu126", SKIP_VENV="1")
    proc = subprocess.run(
        ["bash", str(REPO / "container" / "install-python.sh"), str(venv)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    calls = pip_log.read_text().splitlines()
    torch_call = next(c for c in calls if "--index-url https://download.pytorch.org/whl/cu126" in c)
    assert "torch==" in torch_call and "torchvision==" in torch_call
    assert calls.index(torch_call) < next(i for i, c in enumerate(calls) if "-r " in c)


# --- 7. GPU counts under CUDA_VISIBLE_DEVICES and SLURM ----------------------------------------------

FOUR = [{"index": i, "uuid": f"GPU-{i}aaa-{i}", "name": "H100"} for i in range(4)]


@pytest.mark.parametrize(
    "env, want",
    [
        ({}, [0, 1, 2, 3]),
        ({"CUDA_VISIBLE_DEVICES": "2,3"}, [2, 3]),
        ({"CUDA_VISIBLE_DEVICES": "GPU-1aaa,GPU-3"}, [1, 3]),
        ({"CUDA_VISIBLE_DEVICES": ""}, []),
        ({"CUDA_VISIBLE_DEVICES": "-1"}, []),
        ({"CUDA_VISIBLE_DEVICES": "0,7,1"}, [0]),  # CUDA stops at the first unknown entry
        ({"SLURM_GPUS_ON_NODE": "2"}, [0, 1]),
        ({"CUDA_VISIBLE_DEVICES": "1,2,3", "SLURM_GPUS_ON_NODE": "2"}, [1, 2]),
    ],
)
def test_visible_gpus(env, want):
    assert [g["index"] for g in hw.visible(FOUR, env)] == want


def test_cells_beyond_the_visible_gpus_are_skipped_not_failed(sandbox, monkeypatch):
    sys.path.insert(0, str(Path(__file__).parent))
    import fake_sweep

    monkeypatch.setattr(vision_launch, "launch_command", fake_sweep.fake_launch)
    monkeypatch.setenv("FAKE_LAUNCHES", str(sandbox / "launches.txt"))
    monkeypatch.setattr(hw, "gpus", lambda: FOUR)
    monkeypatch.setattr(hw, "cuda_problem", lambda info, b=None: None)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    sweep.sweep(["V4"], "test")
    rec = store.read_json(store.sweeps_dir("test") / "V4.json")
    assert rec["hardware"]["gpu_count"] == 1
    assert {r["status"] for r in rec["runs"]} == {"ok"} and len(rec["runs"]) == 2
    assert len(rec["skipped"]) == 2 and all("needs 2 ranks" in s["reason"] for s in rec["skipped"])


# --- 8. one line before any run; the root cause after a failed one ------------------------------


def test_missing_llama3_dir_is_one_line_not_a_traceback(monkeypatch, tmp_path):
    """`make fig-vram PROFILE=paper LLAMA3_DIR=/nonexistent` on a GPU node."""
    env = dict(os.environ, LLAMA3_DIR="/nonexistent", RESULTS_DIR=str(tmp_path / "r"))
    env["PYTHONPATH"] = str(REPO)
    code = (
        "import sys; from run.node import probe; from run.sweep import runner as sweep; "
        f"probe.probe = lambda: {{**{_cpu_info()!r}, **{NODE!r}}}; "
        "probe.cuda_problem = lambda info, b=None: None; "
        "sys.exit(sweep.main(['--scale', 'paper', '--exp', 'L8']))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert lines == ["error: LLAMA3_DIR=/nonexistent is not a folder"]
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    "log, rc, want",
    [
        ("torchrun_child_error.txt", 1, "ValueError: bad value in rank 1"),
        ("torchrun_sigkill.txt", 1, "killed (SIGKILL), likely out of host memory"),
        ("torchrun_nccl_echo.txt", 1, "torch.OutOfMemoryError: CUDA out of memory."),
        ("bad_input.txt", 2, "error: MNIST not found under data/mnist/MNIST/raw"),
        ("single_process.txt", 1, "run.llm.assets.AssetError: tokenizer 'llama3' needs"),
    ],
)
def test_the_root_cause_of_a_failed_run(log, rc, want):
    text = (LOGS / log).read_text()
    got = failure.root_cause(text, rc)
    assert got.startswith(want), got
    assert "ChildFailedError" not in got


def test_a_process_killed_without_torchrun_names_its_signal():
    assert failure.root_cause("step 1\nstep 2\n", -9) == (
        "killed (SIGKILL), likely out of host memory"
    )
    assert failure.root_cause("", -15) == "killed (SIGTERM)"


# --- 21. progress: [k/N] with estimates, and a heartbeat while a run goes ---------------------------


def test_progress_lines_and_heartbeat(sandbox, monkeypatch, capsys):
    sys.path.insert(0, str(Path(__file__).parent))
    import fake_sweep

    monkeypatch.setattr(vision_launch, "launch_command", fake_sweep.fake_launch)
    monkeypatch.setenv("FAKE_LAUNCHES", str(sandbox / "launches.txt"))
    monkeypatch.setenv("FAKE_MODE", "slow:fp16")
    monkeypatch.setenv("HEARTBEAT_S", "0.3")
    sweep.sweep(["V3"], "test")
    out = capsys.readouterr().out.splitlines()
    starts = [ln for ln in out if ln.startswith("[") and "] mnv2-" in ln]
    total = int(starts[0].split("/")[1].split("]")[0])
    assert [ln.split("]")[0] for ln in starts] == [f"[{k}/{total}" for k in range(1, 7)]
    assert total >= 6 and all("est. " in ln and "ETA of the scale" in ln for ln in starts)
    beats = [ln for ln in out if "... mnv2-fp16" in ln and "running" in ln]
    assert len(beats) >= 2 * 2  # two fp16 runs of 1.5 s, a line every 0.3 s
    # each beat quotes the run's last log line, from the first beat after the run printed it
    # (the run's own start-up may take longer than a beat on a loaded machine)
    for name in {ln.split("... ")[1].split(":")[0] for ln in beats}:
        mine = [ln for ln in beats if f"... {name}:" in ln]
        said = [i for i, ln in enumerate(mine) if "[fake] working on it" in ln]
        assert said and said == list(range(said[0], len(mine))) and len(said) >= 2, mine
    sweep.sweep(["V3", "V4"], "test")  # V3's runs are done: numbering goes on from them
    again = [ln for ln in capsys.readouterr().out.splitlines() if "] mnv2-" in ln]
    assert again[0].startswith(f"[7/{total}]")


# --- 13. L8's peak memory is the last step's, the maximum beside it ---------------------------------


def test_peak_memory_of_the_last_step_and_the_maximum():
    from run.llm.metrics import GIB, summarize

    recs = [
        {"time_s": 1.0, "loss": 1.0, "peak_memory_active": 30.0},
        {"time_s": 1.0, "loss": 1.0, "peak_memory_active": 22.0},
        {"time_s": 1.0, "loss": 1.0, "peak_memory_active": 21.5},
    ]
    s = summarize(recs, 0, 1)
    assert s["peak_memory_active_last_bytes"] == int(21.5 * GIB)
    assert s["peak_memory_active_bytes"] == int(30.0 * GIB)


def test_l8_table_shows_the_last_step_and_the_maximum():
    import pandas as pd

    from analysis.artifacts import fig_vram
    from run.llm.metrics import GIB

    df = pd.DataFrame(
        [
            {"dataset": "instruct", "method": "lora", "gpus": 1, "status": "ok", "run": "a",
             "peak_memory_bytes": 21 * GIB, "peak_memory_max_bytes": 30 * GIB,
             "memory_kind": "gpu_active", "error": None},
            {"dataset": "instruct", "method": "qat", "gpus": 2, "status": "oom", "run": "b",
             "peak_memory_bytes": None, "peak_memory_max_bytes": None,
             "memory_kind": None, "error": "OutOfMemoryError: CUDA out of memory"},
        ]
    )  # fmt: skip
    t = fig_vram.table(df, "test").set_index("run")
    assert t.loc["a", "peak_memory_gib"] == 21 and t.loc["a", "peak_memory_max_gib"] == 30
    assert pd.isna(t.loc["b", "peak_memory_gib"]) and t.loc["b", "status"] == "oom"


# --- 14. sequences capped, the tokenizer in the run name ---------------------------------------------


def test_the_tokenizer_is_part_of_an_8b_run_name(monkeypatch):
    monkeypatch.delenv("LLAMA3_DIR", raising=False)
    monkeypatch.delenv("LLAMA3_TOKENIZER", raising=False)
    base = {**llm_spec.DEFAULTS, "model": "llama3_8b", "dataset": "summary"}
    byte = llm_spec.canonical(base)
    assert byte["tokenizer"] == "bytes" and byte["max_seq_len"] == 2048
    assert llm_spec.run_name(byte).endswith("-random-tok_bytes")
    monkeypatch.setenv("LLAMA3_TOKENIZER", "/models/tokenizer.model")
    real = llm_spec.canonical(base)
    assert real["tokenizer"] == "llama3" and llm_spec.run_name(real).endswith("-tok_llama3")
    assert llm_spec.run_name(byte) != llm_spec.run_name(real)
    assert llm_spec.run_name({**real, "max_seq_len": 4096}).endswith("-seq4096-random-tok_llama3")


def test_the_tokenizer_block_caps_sequences(monkeypatch, tmp_path):
    from run.llm import config as llm_config

    monkeypatch.setenv("LLM_DATA_ROOT", str(tmp_path))
    monkeypatch.delenv("LLAMA3_DIR", raising=False)
    monkeypatch.delenv("LLAMA3_TOKENIZER", raising=False)
    spec = llm_spec.canonical({**llm_spec.DEFAULTS, "model": "llama3_8b", "dataset": "grammar"})
    block, kind = llm_config.tokenizer_block(spec)
    assert kind == "bytes" and block["max_seq_len"] == 2048
    assert Path(block["path"]).is_file() and "prompt_template" in block
    tiny = llm_spec.canonical(llm_spec.DEFAULTS)
    assert llm_config.tokenizer_block(tiny)[0]["max_seq_len"] == 768
    with pytest.raises(ValueError, match="does not fit the tiny model"):
        llm_spec.validate({**llm_spec.DEFAULTS, "tokenizer": "llama3"})


# --- 16. random Llama3-8B weights are made on the GPU ------------------------------------------------


def test_random_weights_are_made_on_the_ranks_gpu(monkeypatch):
    from run.llm import weights

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setenv("LOCAL_RANK", "2")
    monkeypatch.setenv("WORLD_SIZE", "1")  # one device too, not only distributed runs
    assert weights.weights_device() == torch.device("cuda", 2)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert weights.weights_device() == torch.device("cpu")


# --- 17. every entry point binds its device before NCCL and ends its process group ----------------


class _Stop(Exception):
    pass


def _fake_cuda(monkeypatch, calls: list) -> None:
    import torch.distributed as dist

    monkeypatch.setattr(toolchain, "gpu_nodes", lambda: True)  # a CUDA machine has device nodes
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "set_device", lambda d: calls.append(("set_device", str(d))))

    def init(backend, **kw):  # noqa: ANN001, ANN202
        calls.append(("init", backend, str(kw.get("device_id"))))
        raise _Stop

    monkeypatch.setattr(dist, "init_process_group", init)
    monkeypatch.setattr(hw, "check_cuda", lambda info=None: None)


def test_vision_binds_its_gpu_before_nccl(monkeypatch, tmp_path):
    from run.vision import train as vision

    calls: list = []
    _fake_cuda(monkeypatch, calls)
    monkeypatch.setattr(vision_launch, "preflight", lambda specs: None)
    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(vision_spec.DEFAULTS))
    with pytest.raises(_Stop):
        vision.main(["--spec", str(spec_file), "--run-dir", str(tmp_path)])
    assert calls == [("set_device", "cuda:0"), ("init", "nccl", "cuda:0")]


def test_vision_binds_its_gpu_before_asking_cuda_about_bf16(monkeypatch, tmp_path):
    from run.vision import train as vision

    calls: list = []
    _fake_cuda(monkeypatch, calls)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(vision_launch, "preflight", lambda specs: None)
    monkeypatch.setattr(
        torch.cuda, "is_bf16_supported", lambda **kw: calls.append(("bf16?",)) or True
    )
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps({**vision_spec.DEFAULTS, "gpus": 2, "precision": "bf16"}))
    with pytest.raises(_Stop):
        vision.main(["--spec", str(spec_file), "--run-dir", str(tmp_path)])
    assert calls[0] == ("set_device", "cuda:1") and ("bf16?",) in calls, calls
    assert calls[-1] == ("init", "nccl", "cuda:1")


def test_llm_binds_its_gpu_before_nccl(monkeypatch, tmp_path):
    from run.llm import compat
    from run.llm import tune as llm_tune

    calls: list = []
    _fake_cuda(monkeypatch, calls)
    monkeypatch.setattr(compat, "apply", lambda cuda: [])
    monkeypatch.setenv("LOCAL_RANK", "1")
    spec = llm_spec.canonical({**llm_spec.DEFAULTS, "gpus": 2})
    with pytest.raises(_Stop):
        llm_tune.run_recipe(spec, {}, {}, tmp_path, cuda=True)
    assert calls == [("set_device", "cuda:1"), ("init", "cuda:nccl,cpu:gloo", "cuda:1")]


@pytest.mark.integration
def test_vision_ends_its_process_group(sandbox, monkeypatch):
    """A real one-rank gloo run in this process: the group is gone afterwards."""
    import torch.distributed as dist

    from run.vision import train as vision

    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "29517")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    monkeypatch.setenv("LOCAL_RANK", "0")
    spec = {**vision_spec.DEFAULTS, "train_images": 32, "test_images": 16, "image_size": 32}
    run_dir = sandbox / "pg"
    run_dir.mkdir()
    (run_dir / "spec.json").write_text(json.dumps(spec))
    threads = torch.get_num_threads()
    try:
        assert vision.main(["--spec", str(run_dir / "spec.json"), "--run-dir", str(run_dir)]) == 0
    finally:
        torch.set_num_threads(threads)
    assert not dist.is_initialized()
    assert store.read_json(run_dir / store.SUMMARY)["status"] == "ok"
