"""The parser benchmark: its options, its verdicts, the HTA hook, and a tiny run end to end."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from analysis import bench_analysis as ba
from analysis import bench_hta as bh
from analysis.profiles import kineto_fast


def _result(kind: str, size_mb: float, mb_s: float, peak_mb: float) -> dict:
    return {"kind": kind, "size_mb": size_mb, "read_mb_s": mb_s, "cli_mb_s": mb_s / 3,
            "peak_mb": peak_mb, "cli_peak_mb": peak_mb + 5}  # fmt: skip


def test_defaults_and_options() -> None:
    args = ba.build_parser().parse_args([])
    assert args.sizes == [50, 500] and args.kinds == ["nsys", "kineto", "kineto.gz"]
    args = ba.build_parser().parse_args(["--sizes", "1.5", "8", "--kinds", "kineto.gz"])
    assert args.sizes == [1.5, 8] and args.kinds == ["kineto.gz"]
    with pytest.raises(SystemExit):
        ba.main(["--sizes", "0"])


def test_verdicts() -> None:
    results = [
        _result("nsys", 500, 250, 130),  # out of size order on purpose
        _result("nsys", 50, 210, 110),
        _result("kineto", 50, 120, 110),
        _result("kineto", 500, 99, 140),
        _result("kineto.gz", 50, 100, 100),
    ]
    nsys, kineto, gz = ba.verdicts(results)
    assert nsys.startswith("verdict nsys: speed PASS (slowest 210 MB/s, need >= 200)")
    assert "memory flat (peak 110 MB at 50 MB -> 130 MB at 500 MB: x1.18" in nsys
    assert "speed FAIL (slowest 99 MB/s, need >= 100)" in kineto
    assert "memory NOT flat" in kineto and "x1.27" in kineto
    assert "speed PASS" in gz and "memory n/a (one size)" in gz
    assert gz.endswith("; cli (metrics + breakdown, one pass): speed FAIL (slowest 33 MB/s, need"
                       " >= 100); memory n/a (one size)")  # fmt: skip
    assert (
        "; cli (metrics + breakdown, one pass): speed FAIL (slowest 70 MB/s, need >= 200)" in nsys
    )
    assert nsys.endswith(
        "memory flat (peak 115 MB at 50 MB -> 135 MB at 500 MB: x1.17, flat when <= x1.25)"
    )


def test_hta_hook(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.delenv(bh.HTA_ENV, raising=False)
    python, note = bh.find_hta(None)
    assert python is None and note.startswith("HTA: not found") and bh.HTA_ENV in note
    python, note = bh.find_hta(sys.executable)  # the project venv never has HTA
    assert python is None and "cannot import hta" in note
    python, note = bh.find_hta("/nonexistent/python")
    assert python is None and "cannot run" in note
    monkeypatch.delenv(bh.HTA_TRACE_ENV, raising=False)
    trace, note = bh.find_hta_trace(None)
    assert trace is None and note.startswith("HTA: no trace") and bh.HTA_TRACE_SOURCE[1] in note
    trace, note = bh.find_hta_trace(tmp_path / "gone.json.gz")
    assert trace is None and "is not a file" in note
    monkeypatch.setenv(bh.HTA_TRACE_ENV, str(tmp_path))
    assert bh.find_hta_trace(None)[0] is None
    (tmp_path / "t.json").write_text("{}")
    monkeypatch.setenv(bh.HTA_TRACE_ENV, str(tmp_path / "t.json"))
    assert bh.find_hta_trace(None) == (tmp_path / "t.json", "")


def test_command_counts_its_own_memory_not_ours() -> None:
    """A child forked from a big process and exec'd would report the big one's peak."""
    held = bytearray(300 << 20)  # noqa: F841  (this process: 300 MB more)
    held[::4096] = b"x" * len(held[::4096])
    bare = bh.command([sys.executable, "-c", "pass"])
    assert bare["peak_mb"] < 100
    big = bh.command(
        [sys.executable, "-c", "b = bytearray(200 << 20); b[::4096] = b'y' * len(b[::4096])"]
    )
    assert 200 < big["peak_mb"] < 250
    with pytest.raises(RuntimeError, match="failed \\(3\\)"):
        bh.command([sys.executable, "-c", "raise SystemExit(3)"])


def test_startup_and_hta_verdicts() -> None:
    run = {"kb": 10.1, "runs": 5, "s": 0.25, "lo": 0.2, "hi": 0.4, "cpu_s": 0.2, "peak_mb": 38.0,
           "bare_s": 0.02}  # fmt: skip
    shown, verdict = bh.startup_lines(run)
    assert "10.1 KB Kineto trace" in shown and "median 0.250 s" in shown
    assert verdict == "verdict start-up: PASS (median 0.250 s, need <= 0.3 s)"
    assert bh.startup_lines({**run, "s": 0.31})[1].startswith("verdict start-up: FAIL")


def test_versus_hta_pairs_whole_commands(tmp_path: Path, monkeypatch) -> None:
    """With a stand-in for HTA on the path: the pairs, their order and the verdict line."""
    fake = tmp_path / "fake" / "hta"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "trace_analysis.py").write_text(
        "import glob, json, os, time\n"
        "class TraceAnalysis:\n"
        "    def __init__(self, trace_dir):\n"
        "        (path,) = glob.glob(os.path.join(trace_dir, '*'))\n"
        "        self.data, self.ballast = json.load(open(path)), bytearray(400 << 20)\n"
        "        self.ballast[::4096] = b'z' * len(self.ballast[::4096])\n"
        "        time.sleep(2)\n"
        "    def get_temporal_breakdown(self, visualize):\n"
        "        return len(self.data['traceEvents'])\n"
    )
    dist = tmp_path / "fake" / "HolisticTraceAnalysis-9.9.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: HolisticTraceAnalysis\nVersion: 9.9\n"
    )
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "fake"))
    trace = tmp_path / "rank0.pt.trace.json"
    bh.small_trace(trace)
    runs = bh.versus_hta(sys.executable, trace, pairs=2)
    assert len(runs) == 2 and all(r["hta"]["version"] == "9.9" for r in runs)
    assert all(r["hta"]["peak_mb"] > 400 and r["ours"]["peak_mb"] < 100 for r in runs)
    assert all(r["hta"]["parse_s"] >= 2 for r in runs)
    lines = bh.hta_lines(runs, trace)
    assert lines[0].startswith("HTA 9.9 vs ours on HTA's own trace rank0.pt.trace.json")
    assert "2 pairs" in lines[0] and lines[2].startswith("  HTA (TraceAnalysis")
    assert lines[3].startswith("verdict vs HTA (ours/HTA, median of the pairs): time ")
    assert "memory PASS" in lines[3]  # 400 MB of ballast against our few tens
    # the verdict on the medians of the pairs' ratios, against 1/7 and 1/5
    fake = [{"ours": {"s": o, "cpu_s": o, "peak_mb": 30.0},
             "hta": {**runs[0]["hta"], "s": h, "cpu_s": h, "peak_mb": m}}
            for o, h, m in ((1.0, 8.0, 100.0), (1.0, 6.0, 200.0), (1.0, 7.5, 160.0))]  # fmt: skip
    verdict = bh.hta_lines(fake, trace)[3]
    assert "time PASS (0.133, need <= 0.143); memory PASS (0.188, need <= 0.200)" in verdict
    fake[0]["hta"]["s"] = fake[2]["hta"]["s"] = 6.5
    fake[1]["hta"]["peak_mb"] = fake[2]["hta"]["peak_mb"] = 140.0
    verdict = bh.hta_lines(fake, trace)[3]
    assert "time FAIL (0.154, need <= 0.143); memory FAIL (0.214, need <= 0.200)" in verdict


def test_bench_tiny(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.delenv(bh.HTA_ENV, raising=False)
    assert ba.main(["--sizes", "0.5", "--workdir", str(tmp_path), "--pairs", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "read MB/s" in lines[0] and "peak MB" in lines[0]
    assert [line.split()[0] for line in lines[1:4]] == ["nsys", "kineto", "kineto.gz"]
    assert all(line.endswith(" ok") for line in lines[1:4])
    assert [line.split(":")[0] for line in lines[4:7]] == [f"verdict {k}" for k in ba.KINDS]
    assert lines[7] == f"Kineto events decoded by {kineto_fast.name()}"
    assert lines[8].startswith("start-up, `python -m analysis.profiles.cli summary` on a")
    assert "2 runs" in lines[8] and "bytecode cached" in lines[8]
    assert lines[9].startswith("verdict start-up: ")
    assert lines[10].startswith("HTA: not found")
    assert lines[11].startswith("load average (1 min): ")
    assert list(tmp_path.iterdir()) == []
