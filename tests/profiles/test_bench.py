"""The parser benchmark runs end to end at a tiny size and cleans up after itself."""

from __future__ import annotations

from pathlib import Path

from analysis.bench_analysis import main


def test_bench_tiny(tmp_path: Path, capsys) -> None:
    assert main(["--size-mb", "0.5", "--workdir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "nsys" in out and "torch" in out and "MB/s" in out
    assert list(tmp_path.iterdir()) == []
