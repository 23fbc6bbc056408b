"""The Kineto reader's two ways to one result (issue 37 item 4: speed without another answer).

- the optional msgspec decoder (kineto_fast) against json's, batch by batch: on real traces of the
  corpus and on made ones with what msgspec refuses (NaN, foreign elements, args that are no
  object), each batch it refuses decoded by json; skipped where msgspec is not installed;
- the unions of a small trace folded in plain Python (intervals.small_unions) against numpy's;
- the nsys capture modes the reader names, equal to those the artifact's launch writes;
- a run folder given to a reader without run/: refused in one line.
"""

from __future__ import annotations

import importlib.util
import random
from pathlib import Path

import pytest
from corpus_files import ABSENT, CORPUS, corpus_files
from profile_builders import kineto_event, write_trace

from analysis.profiles import ProfileError, intervals, kineto_fast, run_names
from analysis.profiles.breakdown import read_torch
from analysis.profiles.capture_nsys import CAPTURE_API, CAPTURE_DURATION, CAPTURE_WHOLE
from analysis.profiles.diff import read_side
from run.node import profiling

MSGSPEC = importlib.util.find_spec("msgspec") is not None
needs_msgspec = pytest.mark.skipif(not MSGSPEC, reason="msgspec (optional: .[fast]) not installed")
DECODER = kineto_fast.decoder  # (the tests below replace it)


def _read(path: Path) -> tuple:
    """What a reading gives: every metric row, the wall, the breakdown; or the error line."""
    try:
        prof, bd = read_torch(path)
    except ProfileError as exc:
        return ("error", str(exc))
    rows = sorted((r.metric, r.raw_name, r.calls, r.total_s, r.bytes) for r in prof.rows)
    return rows, prof.wall_s, prof.wall_from, prof.device_kind, bd


def _both(path: Path, monkeypatch) -> tuple[tuple, tuple, int]:
    """(read with msgspec, read with json, batches msgspec decoded)."""
    decoded = []

    def counting():
        decode = DECODER()
        return None if decode is None else lambda text: decoded.append(1) or decode(text)

    monkeypatch.setattr(kineto_fast, "decoder", counting)
    fast = _read(path)
    monkeypatch.setattr(kineto_fast, "decoder", lambda: None)
    return fast, _read(path), len(decoded)


def _events(n: int, seed: int) -> list[dict]:
    """n steps of a GPU job: CPU ops, launches, blocking calls, kernels on two devices (some
    NCCL), copies with bytes, flows and instant events, written as torch writes them."""
    rng = random.Random(seed)
    events = []
    for step in range(n):
        t = 1_700_000_000_000.0 + step * 900.0 + rng.random()
        events += [
            kineto_event("cpu_op", "aten::mm", t, 300.0 + rng.random(), **{"Input Dims": [[2, 3]]}),
            kineto_event("cuda_runtime", "cudaLaunchKernel", t + 5, 4.0, correlation=step),
            kineto_event("cuda_runtime", "cudaStreamSynchronize", t + 400, 50.0),
            kineto_event("kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", t + 10, 80.0,
                         device=step % 2, stream=7),
            kineto_event("kernel", "gemm", t + 50, 120.0 + rng.random(), device=step % 2),
            kineto_event("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", t + 200, 8.0,
                         device=0, bytes=1 << 20),
            {"ph": "f", "id": step, "pid": 0, "tid": 7, "ts": t + 10, "cat": "ac2g", "name": "ac2g"},
            {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1,
             "tid": 1, "ts": t + 3, "args": {"Bytes": 512}},
        ]  # fmt: skip
    return events


@needs_msgspec
def test_msgspec_reads_made_traces_as_json_does(tmp_path: Path, monkeypatch) -> None:
    events = _events(600, 1)  # about 400 KB: several batches
    plain = write_trace(tmp_path / "t.json", events)
    fast, slow, decoded = _both(plain, monkeypatch)
    assert fast == slow and decoded > 3
    # what msgspec refuses, in a batch of its own among others: json reads that batch
    odd = [
        *events[:2000],
        kineto_event("cuda_runtime", "cudaMalloc", 1e12, 1.0, x=float("nan")),
        5,
        "text",
        kineto_event("cpu_op", "inf", 1e12, 2.0, y=float("-inf")),
        *events[2000:],
    ]
    weird = write_trace(tmp_path / "odd.json.gz", odd)
    fast, slow, decoded = _both(weird, monkeypatch)
    assert fast == slow and decoded > 3
    # a bad batch (a kernel's args not an object): json's error line, either way
    bad = write_trace(
        tmp_path / "bad.json", [*events[:3000], {**events[3], "args": [1]}]
    )  # a kernel
    fast, slow, _ = _both(bad, monkeypatch)
    assert fast == slow and fast[0] == "error" and "malformed trace event" in fast[1]
    broken = tmp_path / "broken.json"
    broken.write_text(plain.read_text().replace('"dur": 4.0', '"dur": 4.0,,', 900))
    fast, slow, _ = _both(broken, monkeypatch)
    assert fast == slow and fast[0] == "error" and "invalid JSON" in fast[1]


@needs_msgspec
@pytest.mark.corpus
@pytest.mark.skipif(CORPUS is None, reason=ABSENT)
@pytest.mark.parametrize("path", corpus_files("kineto"), ids=lambda p: p.name)
def test_msgspec_reads_the_corpus_as_json_does(path: Path, monkeypatch) -> None:
    fast, slow, _ = _both(path, monkeypatch)
    assert fast == slow


def test_a_small_trace_needs_no_msgspec_nor_numpy(tmp_path: Path, monkeypatch) -> None:
    """One batch: json reads it (kineto_fast is not even asked for its decoder)."""
    asked = []
    monkeypatch.setattr(kineto_fast, "decoder", lambda: asked.append(1))
    read_torch(write_trace(tmp_path / "t.json", _events(20, 2)))
    assert asked == []


@pytest.mark.parametrize("seed", [3, 4])
def test_small_unions_are_numpys(tmp_path: Path, monkeypatch, seed: int) -> None:
    """The same breakdown and CPU-op times whether the end folds in plain Python or in numpy,
    on overlapping work on two devices, nested CPU ops and calls shuffled out of time order."""
    events = _events(300, seed)
    rng = random.Random(seed)
    for i in rng.sample(range(len(events) - 1), 200):
        events[i], events[i + 1] = events[i + 1], events[i]
    events += [kineto_event("cpu_op", "aten::mm", 1_700_000_000_050.0, 20.0),
               kineto_event("kernel", "empty", 1_700_000_000_060.0, 0.0, device=1)]  # fmt: skip
    path = write_trace(tmp_path / "t.json", events)
    got = {}
    for small in (True, False):
        monkeypatch.setattr(intervals, "fold_small", lambda n, small=small: small)
        got[small] = _read(path)
    assert got[True] == got[False] and got[True][4].devices


def test_capture_modes_are_the_launchs() -> None:
    """The reader names the modes itself (it installs without run/): the values run/ writes."""
    assert (CAPTURE_API, CAPTURE_DURATION, CAPTURE_WHOLE) == (
        profiling.CAPTURE_API,
        profiling.CAPTURE_DURATION,
        profiling.CAPTURE_WHOLE,
    )


def test_run_folder_without_run_is_one_line(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "run1").mkdir()
    with monkeypatch.context() as m:
        m.setattr(run_names, "profiling", lambda: None)  # as installed: no run/
        with pytest.raises(ProfileError) as err:
            read_side(str(tmp_path / "run1"))
    assert "\n" not in str(err.value) and "name its profile files" in str(err.value)
    run_names.profiling.cache_clear()
    assert run_names.profiling() is profiling
    with pytest.raises(ProfileError, match="no profile_metrics.csv and no traces"):
        read_side(str(tmp_path / "run1"))


def test_decoder_name_says_which() -> None:
    assert kineto_fast.name().startswith("msgspec" if MSGSPEC else "json")
