"""Every Kineto trace torch has written (issue 37 item 2): torch 1.8-1.10's categories, threads and
whole-number timestamps, a bare array; a ROCm build's trace labelled HIP/ROCm; a trace whose GPU
events are of no category the reader knows refused in one line; CPU-op shares within the window.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from profile_builders import cli_fails, kineto_event, read_metrics_csv, write_trace

from analysis.profiles import ProfileError, breakdown_kineto, read_profile_breakdown
from analysis.profiles.cli import main
from analysis.profiles.kineto_fold import CUDA, HIP
from analysis.profiles.torch_trace import read_torch_trace

# Modern category -> the name torch 1.8-1.10 wrote (libkineto before its late-2021 renames).
OLD_NAMES = {"cuda_runtime": "Runtime", "kernel": "Kernel", "gpu_memcpy": "Memcpy",
             "gpu_memset": "Memset", "cpu_op": "Operator"}  # fmt: skip


def as_torch_1_9(events: list[dict]) -> list[dict]:
    """The same events as torch 1.9 wrote them: its categories, GPU events on a "stream 7"
    thread, whole-number timestamps (the test's times are whole microseconds)."""
    old = []
    for ev in events:
        ev = dict(ev)
        if ev.get("cat") in OLD_NAMES:
            ev["cat"] = OLD_NAMES[ev["cat"]]
        if ev.get("cat") in ("Kernel", "Memcpy", "Memset"):
            ev["tid"] = "stream 7"
        for key in ("ts", "dur"):
            if isinstance(ev.get(key), float):
                assert ev[key] == int(ev[key])
                ev[key] = int(ev[key])
        old.append(ev)
    return old


@pytest.mark.parametrize("bare", [False, True])
def test_torch_1_9_trace_gives_the_modern_figures(tmp_path: Path, gpu_events, bare) -> None:
    modern = write_trace(tmp_path / "modern.json", gpu_events)
    old_events = as_torch_1_9(gpu_events)
    old = tmp_path / "old.json"
    if bare:  # torch 1.8: a bare array, no traceEvents wrapper, no metadata
        old.write_text(json.dumps(old_events))
    else:
        write_trace(old, old_events)
    want, want_split = read_profile_breakdown(modern)
    got, got_split = read_profile_breakdown(old)
    assert got.rows == want.rows and got.wall_s == want.wall_s
    assert got.device_kind == want.device_kind == CUDA
    assert got_split.devices == want_split.devices and got_split.counts == want_split.counts
    assert got_split.host_blocked == want_split.host_blocked > 0
    assert {r.metric for r in got.rows} >= {"cudaLaunchKernel", "memcpy_htod", "nccl_broadcast"}


def rocm_events() -> list[dict]:
    ev = kineto_event
    return [
        ev("cuda_runtime", "hipLaunchKernel", 10.0, 5.0),
        ev("cuda_runtime", "hipLaunchKernel", 20.0, 5.0),
        ev("cuda_runtime", "hipMemcpyAsync", 30.0, 4.0),
        ev("cuda_runtime", "hipStreamSynchronize", 40.0, 30.0),
        ev("cuda_runtime", "hipPointerGetAttribute", 80.0, 1.0),
        ev("kernel", "void at::native::elementwise_kernel<128, 4>()", 15.0, 20.0, device=9),
        ev("gpu_memcpy", "Memcpy DtoH (Device -> Host)", 50.0, 3.0, device=9, bytes=256),
        ev("cpu_op", "aten::copy_", 0.0, 90.0),
    ]


def test_rocm_trace_is_labelled_hip_never_cuda(tmp_path: Path, capsys) -> None:
    path = write_trace(tmp_path / "rank0.pt.trace.json", rocm_events(), roctracer_version=4.1)
    prof, split = read_profile_breakdown(path)
    assert prof.device_kind == split.device_kind == HIP
    assert split.host_blocked == 30_000  # hipStreamSynchronize waits as its CUDA twin does
    got = {r.metric: r.calls for r in prof.rows}
    assert got["hipLaunchKernel"] == 2 and got["hipMemcpyAsync"] == 1
    assert got["hipStreamSynchronize"] == 1 and got["memcpy_dtoh"] == 1
    assert not any(m.startswith("cuda") for m in got)  # never CUDA metrics
    out = tmp_path / "m.csv"
    assert main(["--run", "r", "--out", str(out), str(path)]) == 0
    assert set(read_metrics_csv(out)["device_kind"]) == {HIP}
    text = capsys.readouterr().out
    first = text.splitlines()[0]
    assert first.startswith("rank 0 [torch, HIP/ROCm] ") and "HIP activity" in first
    assert "CUDA activity" not in text and "no CUDA in this profile" not in text
    assert "not applicable to a HIP/ROCm profile (its hip* calls): cudaLaunchKernel" in text
    assert "host blocked in HIP calls" in text
    # without the build's keys, the hip* calls alone say it
    bare = write_trace(tmp_path / "rank1.pt.trace.json", rocm_events())
    assert read_torch_trace(bare).device_kind == HIP


def test_cpu_only_trace_says_no_cuda(tmp_path: Path, capsys) -> None:
    path = write_trace(tmp_path / "r.json", [kineto_event("cpu_op", "aten::mm", 0.0, 9.0)])
    assert read_torch_trace(path).device_kind == ""
    assert main(["--run", "r", "--out", str(tmp_path / "m.csv"), str(path)]) == 0
    assert "  not measured (no CUDA in this profile): cudaLaunchKernel" in capsys.readouterr().out


def test_gpu_events_of_unknown_categories_are_refused(tmp_path: Path) -> None:
    """A trace whose GPU events are all of categories the reader does not know: one line naming
    the categories found, exit 1, nothing written (not 0 rows and exit 0)."""
    ev = kineto_event
    odd = [
        {**ev("gpu_kernel_v9", "gemm", 10.0, 5.0, device=0), "tid": "stream 7"},
        ev("xpu_runtime", "zeLaunch", 5.0, 1.0),
        ev("cpu_op", "aten::mm", 0.0, 20.0),
    ]
    bad = write_trace(tmp_path / "rank1.pt.trace.json", odd)
    good = write_trace(tmp_path / "rank0.pt.trace.json", rocm_events())
    cli_fails(tmp_path, good, bad, "no GPU events this reader knows, but GPU-like events of "
              "categories gpu_kernel_v9 (categories found: cpu_op, gpu_kernel_v9, xpu_runtime)")  # fmt: skip
    # beside GPU work it knows, an unknown GPU category is read around, with one warning
    mixed = write_trace(tmp_path / "mixed.json", [*odd, ev("kernel", "k", 30.0, 2.0, device=0)])
    note = read_torch_trace(mixed).version_note
    assert note == "GPU-like events of categories gpu_kernel_v9 not known to this reader: left out"


def test_unknown_shape_is_one_line(tmp_path: Path) -> None:
    """JSON that is no Chrome trace at all: one ProfileError, whatever its shape."""
    for i, text in enumerate(['{"events": []}', '"trace"', "[1, 2", '{"traceEvents": {}}']):
        path = tmp_path / f"t{i}.json"
        path.write_text(text)
        with pytest.raises(ProfileError) as err:
            read_torch_trace(path)
        assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_cpu_op_time_is_the_union_of_its_calls(tmp_path: Path) -> None:
    """Nested calls of one op and calls on two threads at once count once: a share of at most
    1 where the summed inclusive times (aten::conv1d in aten::conv1d) exceed the window."""
    ev = kineto_event
    events = [
        ev("cpu_op", "aten::conv1d", 0.0, 100.0),
        ev("cpu_op", "aten::conv1d", 10.0, 80.0),  # nested in the first
        {**ev("cpu_op", "aten::copy_", 20.0, 60.0), "tid": 1},
        {**ev("cpu_op", "aten::copy_", 30.0, 60.0), "tid": 2},  # another thread, overlapping
        ev("user_annotation", "ProfilerStep#1", 0.0, 50.0),
        ev("user_annotation", "ProfilerStep#2", 50.0, 50.0),
    ]
    rows = {r.raw_name: r for r in read_torch_trace(write_trace(tmp_path / "t.json", events)).rows}
    assert (rows["aten::conv1d"].calls, rows["aten::conv1d"].total_s) == (2, 100e-6)
    assert (rows["aten::copy_"].calls, rows["aten::copy_"].total_s) == (2, 70e-6)
    assert (rows["ProfilerStep"].calls, rows["ProfilerStep"].total_s) == (2, 100e-6)


@pytest.mark.parametrize("shuffled", [False, True])
def test_cpu_unions_fold_in_windows_or_read_again(tmp_path: Path, monkeypatch, shuffled) -> None:
    """Folded a few calls at a time: in time order the held-back half keeps it exact; shuffled
    beyond the window, the trace is read again keeping every call. Same figures either way."""
    rng = random.Random(5)
    events = []
    for i in range(60):
        start = float(10 * i)
        events.append(kineto_event("cpu_op", f"op{i % 3}", start, float(rng.choice((5, 15, 25)))))
    want = {r.raw_name: (r.calls, r.total_s) for r in read_torch_trace(
        write_trace(tmp_path / "once.json", events)).rows}  # fmt: skip
    if shuffled:
        rng.shuffle(events)
    path = write_trace(tmp_path / "t.json", events)
    monkeypatch.setattr(breakdown_kineto, "CPU_FLUSH_EVENTS", 4)
    made = []
    real = breakdown_kineto.CpuUnions

    def counted(key, keep_all=False):
        made.append(keep_all)
        return real(key, keep_all)

    monkeypatch.setattr("analysis.profiles.torch_trace.CpuUnions", counted)
    got = {r.raw_name: (r.calls, r.total_s) for r in read_torch_trace(path).rows}
    assert got == want
    assert made == ([False, True] if shuffled else [False])
    for name, (_, total) in got.items():
        assert total <= 600e-6, name  # each op's time inside the 600 us the calls span
