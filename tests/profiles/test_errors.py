"""Bad input: one ProfileError that names the file and the problem, never a traceback soup."""

from __future__ import annotations

import gzip
import json
import sqlite3
from pathlib import Path

import pytest
from profile_builders import cli_fails, make_nsys, write_trace

from analysis.profiles import ProfileError, load, read_profile_breakdown
from analysis.profiles.nsys_sqlite import read_nsys_sqlite


def _one_line_error(path: Path, needle: str) -> ProfileError:
    with pytest.raises(ProfileError) as info:
        read_profile_breakdown(path)
    msg = str(info.value)
    assert str(path) in msg and "\n" not in msg
    assert needle in msg, msg
    return info.value


def test_missing_file(tmp_path: Path) -> None:
    _one_line_error(tmp_path / "nope.sqlite", "file not found")
    with pytest.raises(ProfileError, match="file not found"):
        read_nsys_sqlite(tmp_path / "nope.sqlite")


def test_empty_and_unknown(tmp_path: Path) -> None:
    (tmp_path / "e.json").write_bytes(b"")
    _one_line_error(tmp_path / "e.json", "empty file")
    (tmp_path / "x.bin").write_bytes(b"\x00\x01garbage")
    _one_line_error(tmp_path / "x.bin", "unknown format")
    (tmp_path / "r.nsys-rep").write_bytes(b"whatever")
    _one_line_error(tmp_path / "r.nsys-rep", "nsys export --type sqlite")


def test_truncated_json(tmp_path: Path, gpu_events: list[dict]) -> None:
    full = write_trace(tmp_path / "full.json", gpu_events).read_text()
    for cut in (len(full) // 2, len(full) - 3, 40):
        bad = tmp_path / f"cut{cut}.pt.trace.json"
        bad.write_text(full[:cut])
        _one_line_error(bad, "truncated JSON")


def test_truncated_gzip(tmp_path: Path, gpu_events: list[dict]) -> None:
    data = write_trace(tmp_path / "full.json.gz", gpu_events).read_bytes()
    bad = tmp_path / "cut.pt.trace.json.gz"
    bad.write_bytes(data[: len(data) // 2])
    _one_line_error(bad, "gzip")
    # gzip intact, JSON inside cut short
    text = json.dumps({"traceEvents": gpu_events})
    inner = tmp_path / "inner.json.gz"
    inner.write_bytes(gzip.compress(text[:-30].encode()))
    _one_line_error(inner, "truncated JSON")


def test_invalid_json_and_not_a_trace(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "ts": 1, "dur": 2}, {"ph": oops}]}')
    _one_line_error(bad, "invalid JSON")
    other = tmp_path / "config.json"
    other.write_text('{"lr": 0.1, "epochs": 3}')
    _one_line_error(other, "without a traceEvents array")
    weird = tmp_path / "weird.json"
    weird.write_text('{"traceEvents": [{"ph": "X", "ts": "late", "dur": 2}]}')
    _one_line_error(weird, "malformed trace event")


def test_corrupt_sqlite(tmp_path: Path) -> None:
    good = make_nsys(tmp_path / "good.sqlite", [("cudaLaunchKernel_v7000", 0, 10)] * 3000)
    data = good.read_bytes()
    # SQLite header intact, pages overwritten with garbage.
    smashed = tmp_path / "smashed.sqlite"
    smashed.write_bytes(data[:100] + b"\xff" * (len(data) - 100))
    _one_line_error(smashed, "SQLite")
    # Cut in half: the page table points past the end of the file.
    cut = tmp_path / "cut.sqlite"
    cut.write_bytes(data[: len(data) // 2])
    _one_line_error(cut, "SQLite")
    # Not SQLite at all, with a .sqlite name.
    text = tmp_path / "text.sqlite"
    text.write_text("hello")
    _one_line_error(text, "unknown format")
    with pytest.raises(ProfileError, match="not a SQLite file"):
        read_nsys_sqlite(text)


def test_sqlite_of_another_schema(tmp_path: Path) -> None:
    other = tmp_path / "app.sqlite"
    with sqlite3.connect(other) as con:
        con.execute("CREATE TABLE users (id INTEGER, name TEXT)")
    _one_line_error(other, "another schema")
    # Right table name, wrong columns.
    odd = tmp_path / "odd.sqlite"
    with sqlite3.connect(odd) as con:
        con.execute("CREATE TABLE StringIds (id INTEGER, value TEXT)")
        con.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (t0 INTEGER, t1 INTEGER)")
    _one_line_error(odd, "CUPTI_ACTIVITY_KIND_RUNTIME lacks")


def test_export_without_cuda_tables(tmp_path: Path) -> None:
    """An nsys export with no CUDA table: nothing was traced, so no metric can be told apart
    from an absence; one line saying so, not an empty table."""
    path = tmp_path / "cpu_only.sqlite"
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL)")
        con.execute("CREATE TABLE ANALYSIS_DETAILS (duration INTEGER, startTime INTEGER, "
                    "stopTime INTEGER)")  # fmt: skip
        con.execute("INSERT INTO ANALYSIS_DETAILS VALUES (10, 0, 10)")
    err = _one_line_error(path, "nsys export without CUDA tables")
    assert "CUPTI_ACTIVITY_KIND_RUNTIME" in err.problem and "--trace=cuda" in err.problem


def test_duplicate_rank(tmp_path: Path) -> None:
    a = make_nsys(tmp_path / "a_rank0.sqlite", [("cudaLaunchKernel_v7000", 0, 10)])
    b = make_nsys(tmp_path / "b_rank0.sqlite", [("cudaLaunchKernel_v7000", 0, 10)])
    with pytest.raises(ProfileError, match="rank 0 .* already given by"):
        load([a, b])


# Through the CLI (profile_builders.cli_fails): exit 1, one stderr line naming the file, the older
# CSV untouched and nothing else left behind.


def test_cli_truncated_nsys_export(tmp_path: Path) -> None:
    good = make_nsys(tmp_path / "rank0.sqlite", [("cudaLaunchKernel_v7000", 0, 10)])
    bad = make_nsys(tmp_path / "rank1.sqlite", [("cudaLaunchKernel_v7000", 0, 10)] * 3000)
    bad.write_bytes(bad.read_bytes()[: bad.stat().st_size // 2])
    cli_fails(tmp_path, good, bad, "corrupt or truncated SQLite file")


@pytest.mark.parametrize(
    ("inner", "needle"),
    [
        (b"", "not a JSON Chrome trace"),
        (b"rank 0 finished in 12 s\n", "not a JSON Chrome trace"),
        (bytes(range(128, 256)), "not UTF-8 text"),
    ],
)
def test_cli_gzip_holding_no_json(tmp_path: Path, inner: bytes, needle: str) -> None:
    good = write_trace(tmp_path / "rank0.pt.trace.json", [])
    bad = tmp_path / "rank1.pt.trace.json.gz"
    bad.write_bytes(gzip.compress(inner))
    cli_fails(tmp_path, good, bad, needle)


def test_kineto_trace_without_a_rank(tmp_path: Path) -> None:
    """By design (cli --help): no distributedInfo, so the rank comes from "rankN" in the path,
    else from the order on the command line; the error is only two files claiming one rank."""
    named = write_trace(tmp_path / "job_rank3.pt.trace.json", [])
    first = write_trace(tmp_path / "a.pt.trace.json", [])
    second = write_trace(tmp_path / "b.pt.trace.json", [])
    got = {Path(p.path).name: rank for rank, p, *_ in load([first, named, second])}
    assert got == {"a.pt.trace.json": 0, "job_rank3.pt.trace.json": 3, "b.pt.trace.json": 1}
    for p in (named, first, second):
        p.unlink()
    recorded = write_trace(tmp_path / "w.pt.trace.json", [], distributedInfo={"rank": 0})
    rankless = write_trace(tmp_path / "rank0.pt.trace.json", [])
    cli_fails(tmp_path, recorded, rankless, "rank 0 (torch) already given by")


def test_cli_capture_table_that_contradicts_itself(tmp_path: Path) -> None:
    good = make_nsys(tmp_path / "rank0.sqlite", [("cudaLaunchKernel_v7000", 0, 10)])
    bad = make_nsys(tmp_path / "rank1.sqlite", [("cudaLaunchKernel_v7000", 0, 10)])
    with sqlite3.connect(bad) as con:
        con.execute("CREATE TABLE META_DATA_CAPTURE (name TEXT, value TEXT)")  # no key: repeats
        con.executemany(
            "INSERT INTO META_DATA_CAPTURE VALUES (?, ?)",
            [("START_TRIGGER", "cudaProfilerApi"), ("START_TRIGGER", "Immediate")],
        )
    con.close()
    cli_fails(tmp_path, good, bad, "META_DATA_CAPTURE contradicts itself: START_TRIGGER")
    # The same setting written twice with one value is no contradiction.
    with sqlite3.connect(bad) as con:
        con.execute("UPDATE META_DATA_CAPTURE SET value = 'Immediate'")
    con.close()
    assert read_profile_breakdown(bad)[0].file_capture is not None
