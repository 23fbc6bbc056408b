"""Issue 28 item 5: the input versions covered by golden files, and what a newer one does.

A file recording a newer (or unparseable) version is read as the newest covered layout with
exactly one warning line on stderr naming the file and the version; covered files say nothing.
"""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from profile_builders import REPO, make_nsys, set_release, write_trace

from analysis.profiles import read_profile_breakdown
from analysis.profiles.nsys_sqlite import NSYS_COVERED
from analysis.profiles.synth import NSYS_VERSIONS
from analysis.profiles.torch_trace import KINETO_COVERED

RT = [("cudaLaunchKernel_v7000", 1_000, 2_000), ("cudaStreamSynchronize_v3020", 3_000, 9_000)]
EVENTS = [
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 1.0, "dur": 2.0},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "ts": 4.0, "dur": 5.0},
]


def run_cli(tmp_path: Path, *files: Path) -> subprocess.CompletedProcess[str]:
    out = tmp_path / "metrics.csv"
    args = ["--run", "x", "--out", str(out), *map(str, files)]
    return subprocess.run(
        [sys.executable, "-m", "analysis.profiles.cli", *args],
        cwd=REPO, capture_output=True, text=True, check=False,
    )  # fmt: skip


def readme_rows() -> list[list[str]]:
    """README's version table: one [input, version, recorded in, golden test] per row."""
    text = (REPO / "README.md").read_text()
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and len(cells) == 4 and cells[0] in ("nsys SQLite export",
                                                                      "Kineto trace"):  # fmt: skip
            rows.append(cells)
    return rows


def test_covered_versions_have_golden_inputs() -> None:
    """Each covered release is one the synthetic exports are built as, or one the README names
    a real export of (the corpus tier checks that file records that release)."""
    assert set(NSYS_VERSIONS) <= set(NSYS_COVERED)
    rows = {r[1]: r[3] for r in readme_rows() if r[0] == "nsys SQLite export"}
    for version in NSYS_COVERED:
        test = rows[version]
        assert (version in NSYS_VERSIONS) == ("synthetic" in test), version
        assert version in NSYS_VERSIONS or "corpus: `" in test, version


def test_builders_write_the_covered_kineto_schema(tmp_path: Path) -> None:
    doc = json.loads(write_trace(tmp_path / "t.json", EVENTS).read_text())
    assert (str(doc["schemaVersion"]),) == KINETO_COVERED


def test_readme_table_lists_exactly_the_covered_versions() -> None:
    rows = readme_rows()
    nsys = [r[1] for r in rows if r[0] == "nsys SQLite export" and r[2] != "nothing"]
    assert tuple(nsys) == NSYS_COVERED
    schemas = {m for r in rows if r[0] == "Kineto trace" for m in re.findall(r"schema (\d+)", r[1])}
    assert schemas == set(KINETO_COVERED)
    for row in rows:  # every golden test named is there
        for name in re.findall(r"`(tests/profiles/[\w.]+)`", row[3]):
            assert (REPO / name).is_file(), name
    text = (REPO / "README.md").read_text()
    assert f"read as {NSYS_COVERED[-1]}, one\n`warning:` line" in text
    assert f"is read as\n{KINETO_COVERED[-1]}, one `warning:` line" in text


def readme_corpus_files() -> dict[str, tuple[str, str]]:
    """Corpus file named in the README's table -> (input, version)."""
    return {name: (r[0], r[1]) for r in readme_rows()
            for name in re.findall(r"`([\w.-]+\.(?:sqlite|json|json\.gz))`", r[3])}  # fmt: skip


@pytest.mark.parametrize("version", NSYS_COVERED)
def test_covered_and_patch_releases_read_silently(tmp_path: Path, version: str) -> None:
    """A release the corpus covers is built in the newest synthetic layout, naming it."""
    layout = version if version in NSYS_VERSIONS else NSYS_VERSIONS[-1]
    nsys = set_release(make_nsys(tmp_path / "rank0.sqlite", RT, version=layout), version)
    assert read_profile_breakdown(nsys)[0].version_note == ""
    set_release(nsys, f"{version}.1.90")  # a patch release of the same generation
    torch = write_trace(tmp_path / "rank1.pt.trace.json", EVENTS)
    proc = run_cli(tmp_path, nsys, torch)
    assert proc.returncode == 0, proc.stderr
    assert "warning" not in proc.stderr


def test_release_in_the_table_before_2023_3(tmp_path: Path) -> None:
    """nsys up to 2023.2 names its release in EXPORT_META_DATA: read there too."""
    path = make_nsys(tmp_path / "rank0.sqlite", RT)
    with sqlite3.connect(path) as con:
        con.execute("ALTER TABLE META_DATA_EXPORT RENAME TO EXPORT_META_DATA")
        con.execute("UPDATE EXPORT_META_DATA SET value = '2026.4.1'")
    con.close()
    assert (
        "2026.4.1 is newer than the newest tested" in read_profile_breakdown(path)[0].version_note
    )


def test_file_without_a_version_reads_silently(tmp_path: Path) -> None:
    bare = tmp_path / "rank0.pt.trace.json"
    bare.write_text(json.dumps(EVENTS))  # a bare Chrome-trace array records no schemaVersion
    assert read_profile_breakdown(bare)[0].version_note == ""


@pytest.mark.parametrize(
    ("release", "key"),
    [("2027.1.1.204", "EXPORT_PRODUCT_VERSION"), ("2026.3.0", "NSIGHT_SYSTEMS_VERSION")],
)
def test_newer_nsys_is_read_with_one_warning_line(tmp_path: Path, release: str, key: str) -> None:
    path = make_nsys(tmp_path / "rank0.sqlite", RT)
    with sqlite3.connect(path) as con:
        con.execute("DELETE FROM META_DATA_EXPORT")  # only the row under test names a release
    con.close()
    set_release(path, release, key)
    proc = run_cli(tmp_path, path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("warning: ") and str(path) in lines[0] and release in lines[0]
    assert f"newest tested ({NSYS_COVERED[-1]})" in lines[0]
    got = pd.read_csv(tmp_path / "metrics.csv")
    assert set(got["metric"]) == {"cudaLaunchKernel", "cudaStreamSynchronize"}  # read all the same


@pytest.mark.parametrize("schema", [2, "two"])
def test_newer_or_unknown_kineto_schema_one_warning_line(tmp_path: Path, schema: object) -> None:
    path = write_trace(tmp_path / "rank0.pt.trace.json", EVENTS, schemaVersion=schema)
    proc = run_cli(tmp_path, path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0] and str(schema) in lines[0], proc.stderr
    assert re.search(r"Kineto schema version .*read as 1", lines[0])
    assert (tmp_path / "metrics.csv").is_file()


def test_collect_warns_once_per_newer_file(tmp_path: Path) -> None:
    """The sweep's collect step reads through the same path: one line per newer file."""
    traces = tmp_path / "run" / "torch_traces"
    traces.mkdir(parents=True)
    for rank, schema in enumerate((1, 3, 3)):
        write_trace(traces / f"rank{rank}.pt.trace.json", EVENTS, schemaVersion=schema)
    proc = subprocess.run(
        [sys.executable, "-m", "analysis.profiles.collect", str(tmp_path / "run"), "--run", "x",
         "--profiler", "torch"],
        cwd=REPO, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert sorted(Path(line.split(": ")[1]).name for line in lines) == [
        "rank1.pt.trace.json",
        "rank2.pt.trace.json",
    ]
