"""The parser benchmark: its options, its verdicts, the HTA hook, and a tiny run end to end."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from analysis import bench_analysis as ba


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


def test_hta_hook(monkeypatch) -> None:
    monkeypatch.delenv(ba.HTA_ENV, raising=False)
    python, note = ba.find_hta(None)
    assert python is None and note.startswith("HTA: not found") and ba.HTA_ENV in note
    python, note = ba.find_hta(sys.executable)  # the project venv never has HTA
    assert python is None and "cannot import hta" in note
    python, note = ba.find_hta("/nonexistent/python")
    assert python is None and "cannot run" in note


def test_bench_tiny(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.delenv(ba.HTA_ENV, raising=False)
    assert ba.main(["--sizes", "0.5", "--workdir", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "read MB/s" in lines[0] and "peak MB" in lines[0]
    assert [line.split()[0] for line in lines[1:4]] == ["nsys", "kineto", "kineto.gz"]
    assert all(line.endswith(" ok") for line in lines[1:4])
    assert [line.split(":")[0] for line in lines[4:7]] == [f"verdict {k}" for k in ba.KINDS]
    assert lines[7].startswith("HTA: not found")
    assert list(tmp_path.iterdir()) == []
