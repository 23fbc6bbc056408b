"""torch.profiler Chrome-trace reader: real CPU traces from torch, and kineto-format GPU traces."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pandas as pd
import pytest
from profile_builders import assert_independent, cli_table, kineto_event, totals, write_trace

from analysis.profiles import torch_trace as tt
from analysis.profiles.torch_trace import read_torch_trace


def test_gpu_trace_plain_and_gzip_as_the_independent_reading(
    tmp_path: Path, gpu_events: list[dict]
) -> None:
    plain = write_trace(tmp_path / "rank0.pt.trace.json", gpu_events)
    gz = write_trace(tmp_path / "rank1.pt.trace.json.gz", gpu_events)
    df = cli_table("job", [plain, gz])
    assert_independent(df, {0: plain, 1: gz})
    assert set(df["wall_from"]) == {"trace span"} and df["activity_s"].isna().all()
    # The gzip'd copy of the same events gives the same numbers.
    r0, r1 = (df[df["rank"] == r].drop(columns="rank").reset_index(drop=True) for r in (0, 1))
    pd.testing.assert_frame_equal(r0, r1)


def test_gpu_trace_exact_values(tmp_path: Path, gpu_events: list[dict]) -> None:
    prof = read_torch_trace(write_trace(tmp_path / "t.json", gpu_events))
    assert prof.wall_s == pytest.approx(0.010)  # "Trace" span 1000..11000 us
    m = totals(cli_table("r", [tmp_path / "t.json"])).set_index("metric")
    assert m.loc["cudaLaunchKernel", "calls"] == 2  # the driver's cuLaunchKernel is its own
    assert m.loc["cudaLaunchKernel", "total_s"] == pytest.approx(12e-6)
    assert m.loc["cuLaunchKernel", "calls"] == 1 and m.loc["cuLaunchKernel", "total_s"] == 4e-6
    assert m.loc["nccl_allgather_ring_ll", "total_s"] == pytest.approx(400e-6)
    assert m.loc["nccl_allgather_ring_ll", "share"] == pytest.approx(0.04)
    assert m.loc["nccl_broadcast", "calls"] == 1
    assert m.loc["nccl_other", "calls"] == 1  # RING_LL128
    assert m.loc["memcpy_htod", "bytes"] == 602112 + 1000
    assert m.loc["memcpy_htod", "calls"] == 2
    assert m.loc["memcpy_dtoh", "bytes"] == 4
    assert m.loc["memcpy_dtod", "bytes"] == 2048
    assert m.loc["cpu:ProfilerStep", "calls"] == 2  # ProfilerStep#1, #2 merged
    assert pd.isna(m.loc["cudaStreamSynchronize", "bytes"])


def test_every_launch_api_by_category(tmp_path: Path) -> None:
    """Kineto: cudaLaunchKernel[ExC] and cudaGraphLaunch in cuda_runtime, cuLaunchKernel[Ex]
    in cuda_driver; each its own metric, and the derived count sums them once each."""
    ev = kineto_event
    events = [
        ev("Trace", "PyTorch Profiler (0)", 0.0, 1000.0),
        ev("cuda_runtime", "cudaLaunchKernel", 10.0, 5.0),
        ev("cuda_runtime", "cudaLaunchKernelExC", 20.0, 6.0),
        ev("cuda_runtime", "cudaLaunchKernelExC", 30.0, 4.0),
        ev("cuda_runtime", "cudaGraphLaunch", 40.0, 50.0),
        ev("cuda_driver", "cuLaunchKernel", 100.0, 3.0),
        ev("cuda_driver", "cuLaunchKernelEx", 110.0, 2.0),
        ev("cuda_driver", "cuLaunchKernelEx", 120.0, 2.0),
        ev("cuda_runtime", "cudaLaunchCooperativeKernel", 130.0, 8.0),  # not in the list
        # a kernel and a cpu_op named like a launch API are not API calls
        ev("kernel", "cudaLaunchKernel_lookalike", 200.0, 9.0),
        ev("cpu_op", "cudaLaunchKernel", 300.0, 7.0),
    ]
    path = write_trace(tmp_path / "rank0.pt.trace.json", events)
    m = totals(cli_table("r", [path])).set_index("metric")
    want = {"cudaLaunchKernel": 1, "cudaLaunchKernelExC": 2, "cudaGraphLaunch": 1,
            "cuLaunchKernel": 1, "cuLaunchKernelEx": 2, "kernel_launch_all": 7}  # fmt: skip
    assert {k: m.loc[k, "calls"] for k in want} == want
    assert m.loc["kernel_launch_all", "total_s"] == pytest.approx(72e-6)
    assert m.loc["kernel_launch_all", "share"] == pytest.approx(0.072)  # 1 ms trace span
    assert m.loc["cpu:cudaLaunchKernel", "calls"] == 1  # the CPU op stays a CPU op


def test_no_cpu_ops(tmp_path: Path, gpu_events: list[dict]) -> None:
    prof = read_torch_trace(write_trace(tmp_path / "t.json", gpu_events), cpu_ops=False)
    assert not [r for r in prof.rows if r.metric.startswith("cpu:")]


def test_tiny_chunks_match(tmp_path: Path, gpu_events: list[dict], monkeypatch) -> None:
    """Chunk edges inside strings, numbers and separators must not change the result."""
    path = write_trace(tmp_path / "t.json", gpu_events, distributedInfo={"rank": 3})
    want = read_torch_trace(path)
    for size in (1, 2, 3, 7, 64):
        monkeypatch.setattr(tt, "_CHUNK_CHARS", size)
        got = read_torch_trace(path)
        assert got.rows == want.rows and got.wall_s == want.wall_s and got.rank_hint == 3


def test_batches_match_one_by_one(tmp_path: Path, gpu_events: list[dict], monkeypatch) -> None:
    """Elements decoded in batches give what one-by-one decoding gives, where text that looks
    like an element boundary ('},{') sits inside names and nested args, pretty or compact."""
    ev = kineto_event
    tricky = [
        ev("kernel", 'ncclDevKernel_AllGather_RING_LL},{"ph": "X"', 5.0, 3.0),
        ev("cuda_runtime", "cudaLaunchKernel", 7.0, 2.0, inputs=[{"a": 1}, {"b": "}, {"}]),
        ev("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 9.0, 1.0, bytes=8, nest={"x": {}}),
    ]
    events = [*gpu_events[:3], *tricky, *gpu_events[3:]] * 5
    pretty = write_trace(tmp_path / "pretty.json", events)
    compact = tmp_path / "compact.json"
    compact.write_text(json.dumps({"traceEvents": events}, separators=(",", ":")))
    for path in (pretty, compact):
        monkeypatch.setattr(tt, "_BATCH_CHARS", 0)  # no batch: every element on its own
        want = read_torch_trace(path)
        for size in (40, 300, 1 << 19):
            monkeypatch.setattr(tt, "_BATCH_CHARS", size)
            got = read_torch_trace(path)
            assert got.rows == want.rows and got.wall_s == want.wall_s
    broken = tmp_path / "broken.json"
    broken.write_text(pretty.read_text().replace('"dur": 3.0', '"dur": 3.0,,', 1))
    messages = set()
    for size in (0, 1 << 19):
        monkeypatch.setattr(tt, "_BATCH_CHARS", size)
        with pytest.raises(tt.ProfileError) as err:
            read_torch_trace(broken)
        messages.add(str(err.value))
    assert len(messages) == 1  # the error is found, and placed, as without batches


def test_layout_variants(tmp_path: Path, gpu_events: list[dict]) -> None:
    """Bare event array; traceEvents before other keys; compact JSON on one line."""
    want = read_torch_trace(write_trace(tmp_path / "a.json", gpu_events)).rows
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(gpu_events))
    first = tmp_path / "first.json"
    first.write_text(json.dumps({"traceEvents": gpu_events, "distributedInfo": {"rank": 1}}))
    assert read_torch_trace(bare).rows == want
    prof = read_torch_trace(first)
    assert prof.rows == want and prof.rank_hint == 1
    empty = tmp_path / "empty.json"
    empty.write_text('{"traceEvents": []}')
    assert read_torch_trace(empty).rows == []


def _train(steps: int, prof=None, distributed: bool = False) -> None:
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps):
        loss = model(torch.randn(16, 32)).pow(2).mean()
        loss.backward()
        if distributed:
            import torch.distributed as dist

            dist.all_reduce(loss.detach())
        opt.step()
        opt.zero_grad()
        if prof is not None:
            prof.step()


def test_real_cpu_trace(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    import torch.profiler as tp

    with tp.profile(
        activities=[tp.ProfilerActivity.CPU],
        schedule=tp.schedule(wait=0, warmup=1, active=3),
        on_trace_ready=tp.tensorboard_trace_handler(str(tmp_path), "rank0", use_gzip=True),
    ) as prof:
        _train(4, prof)
    (gz,) = tmp_path.glob("rank0.*.pt.trace.json.gz")
    df = cli_table("cpu-run", [gz])
    # A CPU run has no CUDA events: only "cpu:" rows, every paper metric absent.
    assert len(df) and df["metric"].str.startswith("cpu:").all()
    m = totals(df).set_index("metric")
    assert m.loc["cpu:ProfilerStep", "calls"] == 3  # active=3
    assert m.loc["cpu:aten::linear", "calls"] == 2 * 3
    assert 0 < m.loc["cpu:ProfilerStep", "share"] <= 1
    assert (df["rank"] == 0).all() and (df["source"] == "torch").all()

    # export_chrome_trace writes the same kind of data uncompressed.
    with tp.profile(activities=[tp.ProfilerActivity.CPU]) as prof:
        _train(2)
    prof.export_chrome_trace(str(tmp_path / "plain.json"))
    plain = totals(cli_table("cpu-run", [tmp_path / "plain.json"])).set_index("metric")
    assert plain.loc["cpu:aten::linear", "calls"] == 2 * 2
    assert plain.index.str.startswith("cpu:").all()


def test_real_distributed_trace_rank(tmp_path: Path) -> None:
    """With a process group the trace records its rank (distributedInfo), used over the name."""
    pytest.importorskip("torch")
    import torch.distributed as dist
    import torch.profiler as tp

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'pg'}", rank=0, world_size=1)
    try:
        with tp.profile(activities=[tp.ProfilerActivity.CPU]) as prof:
            _train(1, distributed=True)
    finally:
        dist.destroy_process_group()
    path = tmp_path / "rank5_named_but_rank0.json"
    prof.export_chrome_trace(str(path))
    trace = read_torch_trace(path)
    assert trace.rank_hint == 0
    names = {r.raw_name for r in trace.rows}
    assert "c10d::allreduce_" in names and "gloo:all_reduce" in names
    assert cli_table("d", [path])["rank"].unique().tolist() == [0]


def test_gzip_detected_by_content(tmp_path: Path, gpu_events: list[dict]) -> None:
    odd = tmp_path / "trace.bin"  # gzip without .gz suffix
    odd.write_bytes(gzip.compress(json.dumps({"traceEvents": gpu_events}).encode()))
    assert read_torch_trace(odd).rows
