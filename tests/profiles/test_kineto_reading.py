"""The Kineto reader's pieces: the gzip text reader (kineto_gzip) and the per-event loop's
fallbacks for events that lack a field or are no object at all (kineto_fold)."""

from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path

import pytest

from analysis.profiles import ProfileError, read_profile_breakdown
from analysis.profiles.kineto_gzip import GzipText
from analysis.profiles.torch_trace import read_torch_trace

TEXT = '{"traceEvents": [' + ", ".join(['{"name": "é漢\U0001f600 x"}'] * 400) + "]}"


def _read_all(path: Path, size: int) -> str:
    out = []
    with GzipText(path) as fh:
        while piece := fh.read(size):
            assert len(piece) <= size
            out.append(piece)
    return "".join(out)


@pytest.mark.parametrize("size", [1, 2, 3, 7, 1000, 1 << 20])
def test_gzip_text_as_gzip_reads_it(tmp_path: Path, size: int) -> None:
    """Multi-byte characters cut between reads, members one after another, zero padding."""
    data = TEXT.encode()
    one = gzip.compress(data[:1000]) + b"\0" * 5 + gzip.compress(data[1000:]) + b"\0" * 3
    path = tmp_path / "t.json.gz"
    path.write_bytes(one)
    with gzip.open(path) as fh:
        assert fh.read() == data  # as gzip.open reads it
    assert _read_all(path, size) == TEXT


def test_gzip_text_bad_streams(tmp_path: Path) -> None:
    data = gzip.compress(TEXT.encode())
    cut = tmp_path / "cut.gz"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(EOFError):
        _read_all(cut, 1 << 20)
    crc = tmp_path / "crc.gz"
    crc.write_bytes(data[:-8] + bytes([data[-8] ^ 1]) + data[-7:])
    with pytest.raises(zlib.error):
        _read_all(crc, 1 << 20)
    tail = tmp_path / "tail.gz"
    tail.write_bytes(data + b"garbage")
    with pytest.raises(zlib.error):
        _read_all(tail, 1 << 20)
    for path in (cut, crc, tail):
        with pytest.raises(ProfileError, match="gzip"):
            read_profile_breakdown(path)


def test_odd_events_as_before(tmp_path: Path) -> None:
    """Events lacking a field take the slow path: what .get would give (dur 0, name "")."""
    events = [
        [1, 2],
        "text",
        None,
        {"ph": "X", "ts": 0.0},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 10.0},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 20.0, "dur": 4.0},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": None, "dur": 1.0},
        {"ph": "X", "cat": "cuda_driver", "name": "cudaLaunchKernel", "ts": 40.0, "dur": 1.0},
        {"ph": "X", "cat": "cpu_op", "ts": 30.0, "dur": 5.0},
        {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_Broadcast_RING_LL", "ts": 25.0,
         "dur": None, "pid": 3},
        {"ph": "i", "cat": "kernel", "name": "ncclDevKernel_Broadcast_RING_LL", "ts": 99.0},
        {"cat": "kernel", "name": "ncclDevKernel_Broadcast_RING_LL", "ts": 99.0, "dur": 1.0},
    ]  # fmt: skip
    for name in ("t.json", "t.json.gz"):
        path = tmp_path / name
        text = json.dumps({"traceEvents": events})
        path.write_bytes(gzip.compress(text.encode()) if name.endswith(".gz") else text.encode())
        prof = read_torch_trace(path)
        got = {(r.metric, r.raw_name): (r.calls, r.total_s) for r in prof.rows}
        assert got == {
            ("cudaLaunchKernel", "cudaLaunchKernel"): (3, 5e-6),
            ("cpu:", ""): (1, 5e-6),
            ("nccl_broadcast", "ncclDevKernel_Broadcast_RING_LL"): (1, 0.0),
        }
        assert prof.wall_s == 41e-6
        both, split = read_profile_breakdown(path)
        assert both.rows == prof.rows and split.activity == (10_000, 41_000)
        assert list(split.devices) == [3]
