"""The command line: CSV written atomically, a summary, one stderr line and exit 1 on bad input."""

from __future__ import annotations

from pathlib import Path

import pytest
from profile_builders import cli_fails, kineto_event, make_nsys, read_metrics_csv, write_trace

from analysis.profiles.cli import main
from analysis.profiles.metrics import write_rows_atomic

REPO = Path(__file__).resolve().parents[2]
RT = [("cudaLaunchKernel_v7000", 0, 1_000), ("cudaStreamSynchronize_v3020", 1_000, 9_000)]


def test_cli_writes_csv_and_summary(tmp_path: Path, gpu_events, capsys) -> None:
    a = make_nsys(tmp_path / "rank0.sqlite", RT, [("ncclDevKernel_Broadcast_RING_LL", 0, 50)])
    b = write_trace(tmp_path / "rank0.pt.trace.json", gpu_events)
    out = tmp_path / "res" / "metrics.csv"
    assert main(["--run", "demo", "--out", str(out), str(a), str(b)]) == 0
    df = read_metrics_csv(out)
    assert set(df["source"]) == {"nsys", "torch"} and set(df["run"]) == {"demo"}
    text = capsys.readouterr().out
    assert "rank 0 [nsys]" in text and "rank 0 [torch]" in text
    assert "cudaStreamSynchronize" in text
    nsys_part, torch_part = text.split("rank 0 [torch]")
    # the nsys file holds CUDA calls but no copy and no AllGather: not called, 0
    absent = next(ln for ln in nsys_part.splitlines() if "not called (0): " in ln)
    assert "memcpy_htod" in absent and "nccl_allgather_ring_ll" in absent
    assert "cudaLaunchKernel" not in absent and "not measured" not in nsys_part
    # the torch trace launches through cudaLaunchKernel (2) and cuLaunchKernel (1)
    launch_all = next(ln for ln in torch_part.splitlines() if "kernel_launch_all" in ln)
    assert launch_all.split()[-2:] == ["3", "calls"]
    assert "cuLaunchKernel " in torch_part
    assert not list(out.parent.glob(".*tmp"))


def test_cli_says_why_a_metric_is_absent(tmp_path: Path, capsys) -> None:
    ev = kineto_event
    gpu = write_trace(tmp_path / "rank0.pt.trace.json", [  # a real Kineto GPU trace's kind
        ev("cuda_runtime", "cudaLaunchKernel", 0.0, 5.0),
        ev("cuda_runtime", "cudaStreamSynchronize", 10.0, 50.0),
    ])  # fmt: skip
    cpu = write_trace(tmp_path / "rank1.pt.trace.json", [ev("cpu_op", "aten::mm", 0.0, 9.0)])
    assert main(["--run", "x", "--out", str(tmp_path / "m.csv"), str(gpu), str(cpu)]) == 0
    rank0, rank1 = capsys.readouterr().out.split("rank 1 [torch]")
    assert "  not recorded by torch.profiler: cudaEventDestroy\n" in rank0
    called = next(ln for ln in rank0.splitlines() if "not called (0): " in ln)
    assert "cudaEventSynchronize" in called and "cudaEventDestroy" not in called
    # no CUDA at all: every paper metric not measured, cudaEventDestroy included
    measured = next(ln for ln in rank1.splitlines() if "not measured" in ln)
    assert "cudaLaunchKernel" in measured and "cudaEventDestroy" in measured
    assert "not recorded" not in rank1 and "not called" not in rank1


def test_cli_bad_file_one_line_exit_1(tmp_path: Path) -> None:
    bad = tmp_path / "rank1.pt.trace.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "ts": 1')
    cli_fails(tmp_path, make_nsys(tmp_path / "rank0.sqlite", RT), bad, "truncated JSON")


def test_cli_missing_file(tmp_path: Path, capsys) -> None:
    out = tmp_path / "m.csv"
    assert main(["--run", "x", "--out", str(out), str(tmp_path / "gone.sqlite")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "gone.sqlite: file not found" in err[0]
    assert not out.exists()


def test_cli_help(capsys) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    text = capsys.readouterr().out
    assert "nsys export --type sqlite" in text and "nccl_allgather_ring_ll" in text


def test_a_failed_write_leaves_the_old_file(tmp_path: Path) -> None:
    out = tmp_path / "m.csv"
    out.write_text("old\n")

    def rows():
        yield (1,)
        raise OSError("disk full")  # after part of the file was written

    with pytest.raises(OSError, match="disk full"):
        write_rows_atomic(out, ["a"], rows())
    assert out.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["m.csv"]


def test_cli_summary_shows_unified_copies(tmp_path: Path, capsys) -> None:
    # copy kind 11 is a unified-memory (managed) copy: its own metric, shown with its bytes
    a = make_nsys(
        tmp_path / "rank0.sqlite", RT, memcpy=[(11, 0, 500, 4_000_000), (1, 600, 900, 64)]
    )
    assert main(["--run", "u", "--out", str(tmp_path / "m.csv"), str(a)]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if "memcpy_unified" in ln)
    assert line.split()[-4:] == ["1", "calls", "4.0", "MB"]
