"""The wall time shares divide by (issue 19 item 2): the capture window for a cudaProfilerApi run,
the nsys session for --duration and whole-run captures, said in the CSV and in profiling.json."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from profile_builders import cli_fails, make_nsys, read_metrics_csv

from analysis.profiles import collect
from analysis.profiles.metrics import RankProfile
from analysis.profiles.nsys_sqlite import (
    SPAN_ACTIVITY,
    SPAN_SESSION,
    read_nsys_sqlite,
    with_capture,
)
from run import store
from run.llm import launch as llm_launch
from run.llm import spec as llm_spec
from run.node import profiling
from run.vision import launch as vision_launch
from run.vision import spec as vision_spec

REPO = Path(__file__).resolve().parents[2]
# The session (ANALYSIS_DETAILS) runs 0..10 ms: start-up and uncaptured steps. The CUDA activity,
# what a cudaProfilerApi capture records, runs 2..4 ms.
SESSION = (0, 10_000_000)
RT = [
    ("cudaLaunchKernel_v7000", 2_000_000, 2_100_000),
    ("cudaStreamSynchronize_v3020", 2_100_000, 3_900_000),
    ("cudaProfilerStop_v4000", 3_900_000, 4_000_000),
]


def nsys_run(run_dir: Path, capture: str | None) -> Path:
    """A run folder as the sweep leaves it: nsys/rank0.sqlite and, unless by hand, a plan."""
    (run_dir / "nsys").mkdir(parents=True)
    make_nsys(run_dir / "nsys" / "rank0.sqlite", RT, details=SESSION)
    if capture is not None:
        profiling.write_plan(run_dir, {"profiler": "nsys"}, {"max_seconds": 0})
        plan = store.read_json(run_dir / profiling.PROFILING_PLAN)
        store.write_json_atomic(
            run_dir / profiling.PROFILING_PLAN, {**plan, profiling.NSYS_CAPTURE_KEY: capture}
        )
    return run_dir


def test_reader_offers_both_spans(tmp_path: Path) -> None:
    prof = read_nsys_sqlite(nsys_run(tmp_path, None) / "nsys" / "rank0.sqlite")
    assert prof.spans == {SPAN_SESSION: pytest.approx(0.010), SPAN_ACTIVITY: pytest.approx(0.002)}


@pytest.mark.parametrize(
    ("capture", "wall", "span", "why"),
    [
        (profiling.CAPTURE_API, 0.002, SPAN_ACTIVITY, "cudaProfilerApi window"),
        (profiling.CAPTURE_DURATION, 0.010, SPAN_SESSION, "duration"),
        (profiling.CAPTURE_WHOLE, 0.010, SPAN_SESSION, "whole run"),
        (None, 0.010, SPAN_SESSION, "nsys default: whole session"),
    ],
)
def test_choose_wall(capture: str | None, wall: float, span: str, why: str) -> None:
    got, where = choose_wall({SPAN_SESSION: 0.010, SPAN_ACTIVITY: 0.002}, capture)
    assert got == pytest.approx(wall) and where.startswith(span) and why in where


def test_choose_wall_falls_back_and_never_invents() -> None:
    # a --duration export without ANALYSIS_DETAILS: the activity span, saying so
    got, where = choose_wall({SPAN_ACTIVITY: 0.002}, profiling.CAPTURE_DURATION)
    assert got == pytest.approx(0.002) and where.startswith(SPAN_ACTIVITY) and "duration" in where
    # a capture window cannot come from the session: no activity, no wall (shares NaN)
    assert choose_wall({SPAN_SESSION: 0.010}, profiling.CAPTURE_API) == (0.0, "")


def choose_wall(spans: dict[str, float], capture: str | None) -> tuple[float, str]:
    """(wall_s, wall_from) with_capture gives a profile of these spans (SESSION, activity 2-4 ms)."""
    places = {SPAN_SESSION: SESSION, SPAN_ACTIVITY: (2_000_000, 4_000_000)}
    prof = RankProfile("x.sqlite", "nsys", 0.0, "", [], spans=spans,
                       span_ns={k: v for k, v in places.items() if k in spans})  # fmt: skip
    got = with_capture(prof, capture)
    return got.wall_s, got.wall_from


def test_with_capture_leaves_torch_alone(tmp_path: Path) -> None:
    prof = read_nsys_sqlite(nsys_run(tmp_path, None) / "nsys" / "rank0.sqlite")
    torch_like = type(prof)("t.json", "torch", 1.0, "trace span", [])
    assert with_capture(torch_like, profiling.CAPTURE_API) is torch_like
    assert with_capture(prof, profiling.CAPTURE_DURATION).wall_s == pytest.approx(0.010)


@pytest.mark.parametrize(
    ("capture", "wall"), [(profiling.CAPTURE_API, 0.002), (profiling.CAPTURE_DURATION, 0.010)]
)
def test_collect_metrics_uses_and_records_the_span(tmp_path: Path, capture, wall) -> None:
    run_dir = nsys_run(tmp_path, capture)
    out = collect.collect_metrics("r", run_dir, "nsys")
    df = read_metrics_csv(out).set_index("metric")
    sync = df.loc["cudaStreamSynchronize"]
    assert sync["share"] == pytest.approx(0.0018 / wall)
    assert sync["wall_s"] == pytest.approx(wall) and capture in sync["wall_from"]
    plan = store.read_json(run_dir / profiling.PROFILING_PLAN)
    assert plan[profiling.PROFILE_WALL_KEY]["capture"] == capture
    rank0 = plan[profiling.PROFILE_WALL_KEY]["ranks"]["0"]
    assert rank0["wall_s"] == pytest.approx(wall) and rank0["wall_from"] == sync["wall_from"]
    assert plan["max_seconds"] == 0  # the window the sweep planned is still there


def test_collect_metrics_by_hand_takes_nsys_default(tmp_path: Path) -> None:
    run_dir = nsys_run(tmp_path, None)  # no plan, and the export records no capture settings
    df = read_metrics_csv(collect.collect_metrics("r", run_dir, "nsys"))
    assert set(df["wall_from"]) == {
        "ANALYSIS_DETAILS session (nsys default: whole session (the export records no capture "
        "settings))"
    }
    assert df["wall_s"].tolist() == pytest.approx([0.010] * len(df))
    assert df["activity_s"].tolist() == pytest.approx([0.002] * len(df))
    assert not (run_dir / profiling.PROFILING_PLAN).exists()  # none invented


def test_collect_metrics_bad_file_writes_nothing(tmp_path: Path) -> None:
    run_dir = nsys_run(tmp_path, profiling.CAPTURE_API)
    bad = run_dir / "nsys" / "rank1.sqlite"
    bad.write_bytes((run_dir / "nsys" / "rank0.sqlite").read_bytes()[:3000])  # truncated
    before = (run_dir / profiling.PROFILING_PLAN).read_text()
    with pytest.raises(Exception, match="rank1.sqlite: ") as info:
        collect.collect_metrics("r", run_dir, "nsys")
    assert "\n" not in str(info.value)
    assert not (run_dir / profiling.PROFILE_METRICS).exists()
    assert (run_dir / profiling.PROFILING_PLAN).read_text() == before


def test_collect_program_exit_status_and_one_line(tmp_path: Path) -> None:
    """The sweep calls the collector as a program: exit 0 and the CSV path, or 1 and one line."""
    run_dir = nsys_run(tmp_path, profiling.CAPTURE_API)
    cmd = [sys.executable, "-m", "analysis.profiles.collect", str(run_dir), "--run", "r"]
    ok = subprocess.run([*cmd, "--profiler", "nsys"], capture_output=True, text=True, cwd=REPO)
    assert ok.returncode == 0, ok.stderr
    assert Path(ok.stdout.strip()) == run_dir / profiling.PROFILE_METRICS
    (run_dir / profiling.PROFILE_METRICS).unlink()
    bad = subprocess.run([*cmd, "--profiler", "torch"], capture_output=True, text=True, cwd=REPO)
    assert bad.returncode == 1 and bad.stdout == ""
    assert len(bad.stderr.strip().splitlines()) == 1 and "no torch profile" in bad.stderr
    assert not (run_dir / profiling.PROFILE_METRICS).exists()


# --- the launch records the capture mode --------------------------------------------------------


def test_launch_records_capture_mode(tmp_path: Path) -> None:
    cases = [
        (vision_launch, {**vision_spec.DEFAULTS, "gpus": 2}, 0, profiling.CAPTURE_API),
        (llm_launch, {**llm_spec.DEFAULTS, "gpus": 1}, 720, profiling.CAPTURE_DURATION),
        (llm_launch, {**llm_spec.DEFAULTS, "gpus": 2}, 0, profiling.CAPTURE_WHOLE),
    ]
    for i, (mod, spec, seconds, want) in enumerate(cases):
        run_dir = tmp_path / str(i)
        run_dir.mkdir()
        profiling.write_plan(run_dir, {"profiler": "nsys"}, {"max_seconds": seconds})
        mod.launch_command({**spec, "profiler": "nsys"}, run_dir, {"nsys": "/usr/bin/nsys"})
        plan = json.loads((run_dir / profiling.PROFILING_PLAN).read_text())
        assert plan[profiling.NSYS_CAPTURE_KEY] == want, mod.__name__
        assert profiling.read_capture(run_dir) == want
        assert profiling.read_window(run_dir)["max_seconds"] == seconds  # window intact
    assert profiling.read_capture(tmp_path) is None  # by hand: no plan


# --- bad input through the command line ---------------------------------------------------------


def test_cli_other_tools_sqlite(tmp_path: Path) -> None:
    bad = tmp_path / "rank1.sqlite"
    with sqlite3.connect(bad) as con:  # some other tool's database
        con.execute("CREATE TABLE runs (id INTEGER PRIMARY KEY, name TEXT)")
        con.execute("INSERT INTO runs VALUES (1, 'x')")
    cli_fails(tmp_path, make_nsys(tmp_path / "rank0.sqlite", RT), bad, "another schema")


def test_cli_truncated_export(tmp_path: Path) -> None:
    full = make_nsys(tmp_path / "full.sqlite", [("cudaLaunchKernel_v7000", 0, 10)] * 3000)
    bad = tmp_path / "rank1.sqlite"
    bad.write_bytes(full.read_bytes()[: full.stat().st_size // 2])
    full.unlink()
    cli_fails(
        tmp_path, make_nsys(tmp_path / "rank0.sqlite", RT), bad, "corrupt or truncated SQLite file"
    )


def test_cli_export_without_cuda_tables(tmp_path: Path) -> None:
    bad = make_nsys(tmp_path / "rank1.sqlite", RT)
    with sqlite3.connect(bad) as con:
        for table in ("RUNTIME", "KERNEL", "MEMCPY"):
            con.execute(f"DROP TABLE CUPTI_ACTIVITY_KIND_{table}")
    cli_fails(
        tmp_path, make_nsys(tmp_path / "rank0.sqlite", RT), bad, "nsys export without CUDA tables"
    )
