"""The capture as the export records it (issue 20 item 1): META_DATA_CAPTURE picks the wall time
where profiling.json says nothing, nsys's default (the whole session) where neither does, and the
CUDA activity span is reported beside it either way.

Every export here has a 10 ms session (ANALYSIS_DETAILS) and 2 ms of CUDA activity, as
test_capture.py's; only the capture settings differ.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest
from corpus_files import corpus_file
from profile_builders import (
    REPO,
    add_capture_settings,
    add_memsets,
    cli_fails,
    make_nsys,
    read_metrics_csv,
)
from test_capture import RT, SESSION, nsys_run

from analysis.profiles import collect
from analysis.profiles.nsys_sqlite import (
    NSYS_DEFAULT,
    SPAN_ACTIVITY,
    SPAN_SESSION,
    read_nsys_sqlite,
)
from run.node import profiling

WHOLE_S, ACTIVITY_S = 0.010, 0.002
FILE = "META_DATA_CAPTURE"
IMMEDIATE = {"START_TRIGGER": "Immediate", "STOP_TRIGGER": "Application exit"}
# name: (settings in META_DATA_CAPTURE or None for no table, wall_s, wall_from)
CASES = {
    "immediate+duration": (
        {
            **IMMEDIATE,
            "STOP_TRIGGER": "Duration",
            "START_DELAY_MS": "0",
            "RUN_DURATION_MS": "720000",
        },
        WHOLE_S,
        f"{SPAN_SESSION} ({FILE}: duration)",
    ),
    "immediate": (
        {**IMMEDIATE, "START_DELAY_MS": "0", "RUN_DURATION_MS": "0"},
        WHOLE_S,
        f"{SPAN_SESSION} ({FILE}: whole run)",
    ),
    "delay+duration": (
        {"START_TRIGGER": "Delay", "START_DELAY_MS": "5", "RUN_DURATION_MS": "60000"},
        WHOLE_S,
        f"{SPAN_SESSION} ({FILE}: duration)",
    ),
    "cudaProfilerApi": (
        {"START_TRIGGER": "cudaProfilerApi", "STOP_TRIGGER": "cudaProfilerApi"},
        ACTIVITY_S,
        f"{SPAN_ACTIVITY} ({FILE}: cudaProfilerApi window)",
    ),
    "nvtx": (
        {"START_TRIGGER": "NVTX", "STOP_TRIGGER": "NVTX"},
        ACTIVITY_S,
        f"{SPAN_ACTIVITY} ({FILE}: NVTX window)",
    ),
    "range marked": (  # the capture range row wins over an immediate trigger
        {**IMMEDIATE, "CAPTURE_RANGE": "cudaProfilerApi"},
        ACTIVITY_S,
        f"{SPAN_ACTIVITY} ({FILE}: cudaProfilerApi window)",
    ),
    # STOP_TRIGGER (issue 28): how a range closes does not move its window; a timer start
    # stopped by a duration is the session, as is one stopped by the application's exit.
    "cudaProfilerApi+duration": (
        {"START_TRIGGER": "cudaProfilerApi", "STOP_TRIGGER": "Duration", "RUN_DURATION_MS": "30"},
        ACTIVITY_S,
        f"{SPAN_ACTIVITY} ({FILE}: cudaProfilerApi window)",
    ),
    "nvtx+exit": (
        {"START_TRIGGER": "NVTX", "STOP_TRIGGER": "Application exit"},
        ACTIVITY_S,
        f"{SPAN_ACTIVITY} ({FILE}: NVTX window)",
    ),
    "immediate+duration stop": (
        {"START_TRIGGER": "Immediate", "STOP_TRIGGER": "Duration", "RUN_DURATION_MS": "5"},
        WHOLE_S,
        f"{SPAN_SESSION} ({FILE}: duration)",
    ),
    "delay+exit": (
        {"START_TRIGGER": "Delay", "STOP_TRIGGER": "Application exit", "START_DELAY_MS": "2"},
        WHOLE_S,
        f"{SPAN_SESSION} ({FILE}: whole run)",
    ),
    "stop only": (
        {"STOP_TRIGGER": "Application exit"},
        WHOLE_S,
        f"{SPAN_SESSION} ({NSYS_DEFAULT})",
    ),
    "unknown trigger": (
        {"START_TRIGGER": "Hotkey"},
        WHOLE_S,
        f"{SPAN_SESSION} ({FILE}: trigger 'Hotkey' not understood, so nsys default: whole session)",
    ),
    "no table": (None, WHOLE_S, f"{SPAN_SESSION} ({NSYS_DEFAULT})"),
    # issue 37: nsys 2023.3+ writes a row per traced API and per environment variable, so a name
    # that repeats is a list; a wall setting given twice with one value is that value.
    "names repeat": (
        [("CAPTURE_EVENT_TYPE", "OSRuntime"), ("CAPTURE_EVENT_TYPE", "Graphics"),
         ("CAPTURE_EVENT_TYPE", "NvtxEvents"), ("CAPTURE_EVENT_TYPE", "Cuda"),
         ("START_TRIGGER", "Immediate"), ("STOP_TRIGGER", "Delayed"),
         ("PROCESS_0:ENVIRONMENT_VARIABLE", "A=1"), ("PROCESS_0:ENVIRONMENT_VARIABLE", "B=2"),
         ("PROCESS_0:ENVIRONMENT_VARIABLE", None), ("START_DELAY_MS", "0"),
         ("RUN_DURATION_MS", "3307"), ("RUN_DURATION_MS", "3307")],
        WHOLE_S,
        f"{SPAN_SESSION} ({FILE}: duration)",
    ),
}  # fmt: skip
# nsys 2022 writes no META_DATA_CAPTURE: only "no table" is an export it could have made.
VERSIONS = {"no table": ("2022.4", "2024.4", "2025.3")}
# One real META_DATA_CAPTURE of each nsys release in the corpus that writes one (2023.3 on;
# SOURCES.md), read out of the export where it lies: release -> (file, the capture it records).
# Every one is an immediate start stopped "Delayed" with the run's length in RUN_DURATION_MS.
REAL_TABLES = {
    "2023.3.1.92": "RajaATAli__SC23_Programming-Your-GPU-with-OpenMP_Tutorial__openmp_t4.sqlite",
    "2023.3.3.42": "IllusiveAldebaran__nussinov-gpu__a30_mig.sqlite",
    "2024.1.1.59": "ZhangXin8069__qcu__mpirun_2024_1_no_kernels.sqlite",
    "2024.5.4.34": "SamuelAmsih__CUDA__jetson_orin.sqlite",
    "2024.6.1.90": "danae-pan__hpc_assignment3__h100x2.sqlite",
    "2024.6.2.25": "NVIDIA__Fuser__h200_nvtx.sqlite",
    "2025.1.1.103": "NTHU-SC__ISC25-ICON-C__icon_mpi_osrt.sqlite",
    "2025.5.2.266": "florianmattana__CUDA-Kernels__windows_2025_5.sqlite",
    "2026.1.1.204": "GindaChen__nsys-ai__other_clock_2026_1.sqlite",
    "2026.2.1.210": "GindaChen__nsys-ai__mfu_2gpu_nccl_before.sqlite",
}


def export(
    path: Path,
    settings: dict[str, str] | list[tuple[str, str | None]] | None,
    version: str = "2025.3",
) -> Path:
    make_nsys(path, RT, details=SESSION, version=version)
    return add_capture_settings(path, settings) if settings is not None else path


@pytest.mark.parametrize(
    ("case", "version"),
    [(c, v) for c in CASES for v in VERSIONS.get(c, ("2024.4", "2025.3"))],
)
def test_golden_capture_settings(tmp_path: Path, case: str, version: str) -> None:
    settings, wall, wall_from = CASES[case]
    prof = read_nsys_sqlite(export(tmp_path / "rank0.sqlite", settings, version))
    assert prof.wall_s == pytest.approx(wall)
    assert prof.wall_from == wall_from
    assert prof.activity_s == pytest.approx(ACTIVITY_S)


def real_table(name: str) -> tuple[str, list[tuple[str, str | None]]]:
    """(the release META_DATA_EXPORT names, META_DATA_CAPTURE's rows as the file holds them)."""
    path = corpus_file(name)
    with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as con:
        rows = con.execute("SELECT name, value FROM META_DATA_CAPTURE ORDER BY rowid").fetchall()
        release = con.execute(
            "SELECT value FROM META_DATA_EXPORT WHERE name = 'EXPORT_PRODUCT_VERSION'"
        ).fetchone()[0]
    return release, rows


@pytest.mark.parametrize("release", sorted(REAL_TABLES))
def test_real_capture_tables(tmp_path: Path, release: str) -> None:
    """Each release's real table, every row as written (environment, traced APIs), in an export
    whose spans are known: the names that repeat are lists, and the wall is the session."""
    found, rows = real_table(REAL_TABLES[release])
    assert found == release
    names = [n for n, _ in rows]
    assert names.count("PROCESS_0:ENVIRONMENT_VARIABLE") >= 2  # lists once "contradictions"
    assert names.count("CAPTURE_EVENT_TYPE") >= (1 if release.startswith("2026.1") else 2)
    prof = read_nsys_sqlite(export(tmp_path / "rank0.sqlite", rows))
    assert prof.wall_s == pytest.approx(WHOLE_S)
    assert prof.wall_from == f"{SPAN_SESSION} ({FILE}: duration)"


def test_a_wall_setting_given_twice_with_two_values(tmp_path: Path) -> None:
    rows = [*CASES["names repeat"][0], ("START_TRIGGER", "cudaProfilerApi")]
    good = export(tmp_path / "rank0.sqlite", CASES["names repeat"][0])
    bad = export(tmp_path / "rank1.sqlite", rows)
    cli_fails(tmp_path, good, bad,
              f"{FILE} contradicts itself: START_TRIGGER is 'Immediate' and 'cudaProfilerApi'")  # fmt: skip


@pytest.mark.parametrize(
    ("in_file", "plan", "wall"),
    [
        ("cudaProfilerApi", profiling.CAPTURE_DURATION, WHOLE_S),
        ("immediate+duration", profiling.CAPTURE_API, ACTIVITY_S),
        ("unknown trigger", profiling.CAPTURE_API, ACTIVITY_S),
    ],
)
def test_profiling_json_still_decides(tmp_path: Path, in_file: str, plan: str, wall: float) -> None:
    run_dir = nsys_run(tmp_path, plan)
    add_capture_settings(run_dir / "nsys" / "rank0.sqlite", CASES[in_file][0])
    df = read_metrics_csv(collect.collect_metrics("r", run_dir, "nsys"))
    assert df["wall_s"].tolist() == pytest.approx([wall] * len(df))
    assert df["activity_s"].tolist() == pytest.approx([ACTIVITY_S] * len(df))
    assert all(w.endswith(f"(nsys capture: {plan}{' window' * (wall == ACTIVITY_S)})")
               for w in df["wall_from"])  # fmt: skip


def test_collect_by_hand_reads_the_file(tmp_path: Path) -> None:
    run_dir = nsys_run(tmp_path, None)  # no profiling.json: the export's own settings decide
    add_capture_settings(run_dir / "nsys" / "rank0.sqlite", CASES["cudaProfilerApi"][0])
    df = read_metrics_csv(collect.collect_metrics("r", run_dir, "nsys"))
    assert set(df["wall_from"]) == {CASES["cudaProfilerApi"][2]}
    assert df["wall_s"].tolist() == pytest.approx([ACTIVITY_S] * len(df))


def test_memsets_widen_the_activity_span(tmp_path: Path) -> None:
    path = export(tmp_path / "rank0.sqlite", CASES["cudaProfilerApi"][0])
    add_memsets(path, [(4_000_000, 4_500_000)])  # after the last call (4 ms)
    prof = read_nsys_sqlite(path)
    assert prof.activity_s == pytest.approx(0.0025) and prof.wall_s == pytest.approx(0.0025)
    assert not any("memset" in r.raw_name.lower() for r in prof.rows)  # spanned, not a metric


def test_cli_summary_line_says_wall_and_activity(tmp_path: Path) -> None:
    path = export(tmp_path / "rank0.sqlite", None, "2022.4")
    out = tmp_path / "m.csv"
    proc = subprocess.run(
        [sys.executable, "-m", "analysis.profiles.cli", "--run", "x", "--out", str(out), str(path)],
        cwd=REPO, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    head = proc.stdout.splitlines()[0]
    assert f"wall 0.010 s ({SPAN_SESSION} ({NSYS_DEFAULT}))" in head
    assert head.endswith("CUDA activity 0.002 s")
    assert read_metrics_csv(out)["activity_s"].tolist() == pytest.approx([ACTIVITY_S] * 2)


@pytest.mark.parametrize("case", ["immediate+duration", "cudaProfilerApi"])
def test_capture_settings_as_string_ids(tmp_path: Path, case: str) -> None:
    """The other layout seen in exports: META_DATA_CAPTURE(keyId, valueId) into StringIds."""
    settings, wall, wall_from = CASES[case]
    path = export(tmp_path / "rank0.sqlite", None)
    with sqlite3.connect(path) as con:
        top = con.execute("SELECT MAX(id) FROM StringIds").fetchone()[0] or 0
        con.execute("CREATE TABLE META_DATA_CAPTURE (keyId INTEGER, valueId INTEGER)")
        for i, (k, v) in enumerate(settings.items()):
            kid, vid = top + 2 * i + 1, top + 2 * i + 2
            con.executemany("INSERT INTO StringIds VALUES (?, ?)", [(kid, k), (vid, v)])
            con.execute("INSERT INTO META_DATA_CAPTURE VALUES (?, ?)", (kid, vid))
    con.close()
    prof = read_nsys_sqlite(path)
    assert (prof.wall_s, prof.wall_from) == (pytest.approx(wall), wall_from)


# name: (settings that contradict each other, the words of the one error line)
CONTRADICTIONS = {
    "range stop, timer start": (
        {"START_TRIGGER": "Immediate", "STOP_TRIGGER": "cudaProfilerApi"},
        "STOP_TRIGGER 'cudaProfilerApi' closes a capture range, but START_TRIGGER 'Immediate'",
    ),
    "range stop, no start": (
        {"STOP_TRIGGER": "NVTX"},
        "STOP_TRIGGER 'NVTX' closes a capture range, but no START_TRIGGER",
    ),
    "two range kinds": (
        {"START_TRIGGER": "cudaProfilerApi", "STOP_TRIGGER": "NVTX"},
        "a cudaProfilerApi start with a NVTX stop",
    ),
    "duration stop without one": (
        {"START_TRIGGER": "Immediate", "STOP_TRIGGER": "Duration", "RUN_DURATION_MS": "0"},
        "STOP_TRIGGER is 'Duration' but RUN_DURATION_MS is '0'",
    ),
    "delay past the session": (
        {"START_TRIGGER": "Delay", "START_DELAY_MS": "10", "RUN_DURATION_MS": "5"},
        "START_DELAY_MS 10 is not shorter than the session (10.000 ms)",
    ),
}


@pytest.mark.parametrize("case", sorted(CONTRADICTIONS))
def test_capture_settings_that_contradict_each_other(tmp_path: Path, case: str) -> None:
    settings, needle = CONTRADICTIONS[case]
    good = export(tmp_path / "rank0.sqlite", CASES["nvtx"][0])
    bad = export(tmp_path / "rank1.sqlite", settings)
    cli_fails(tmp_path, good, bad, f"{FILE} contradicts itself: {needle}")
