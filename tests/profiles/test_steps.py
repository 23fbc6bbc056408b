"""Issue 37 item 6: --step N / A-B (and --range NAME) restrict the metrics, the breakdown and diff
to training steps: ProfilerStep#N in a Kineto trace, a named NVTX range in an nsys export.

The expected figures are worked out here by hand (synthetic files) or read independently with
the standard library (json, sqlite3) from real files of the corpus, never from analysis/.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from corpus_files import corpus_file
from profile_builders import REPO, kineto_event, make_nsys, read_metrics_csv, write_trace

from analysis.profiles import load
from analysis.profiles.cli import main
from analysis.profiles.steps import Choice, StepError, spans, step_numbers

# Three 10 us steps. Runtime calls, kernels (one NCCL kernel across the step 0/1 boundary) and a
# copy; times in ns. Step 1 = [10_000, 20_000).
RT = [("cudaLaunchKernel_v7000", 0, 1_000), ("cudaLaunchKernel_v7000", 10_000, 11_000),
      ("cudaStreamSynchronize_v3020", 11_000, 19_500), ("cudaLaunchKernel_v7000", 20_000, 21_000)]  # fmt: skip
KERNELS = [("gemm", 500, 4_000), ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 9_000, 12_000),
           ("gemm", 10_500, 14_000), ("gemm", 20_500, 24_000)]  # fmt: skip
COPIES = [(1, 14_000, 15_000, 4096), (2, 25_000, 26_000, 64)]
STEP_1 = {  # worked out by hand: every record clipped to [10_000, 20_000)
    "cudaLaunchKernel": (1, 1_000),
    "cudaStreamSynchronize": (1, 8_500),
    "nccl_other": (1, 2_000),  # [9_000, 12_000) clipped to [10_000, 12_000)
    "memcpy_htod": (1, 1_000),
}
# busy: [10_000, 12_000) u [10_500, 14_000) u [14_000, 15_000) = 5_000 of 10_000
BUSY_1, COMM_1, COMPUTE_1, HOST_1 = 5_000, 2_000, 3_500, 8_500


def nvtx(path: Path, ranges: list[tuple[str, int, int]], text_ids: bool = False) -> Path:
    """Give an export the NVTX_EVENTS rows nsys writes for push/pop ranges (eventType 59)."""
    con = sqlite3.connect(path)
    con.execute(
        "CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL,"
        " rangeId INTEGER, category INTEGER, color INTEGER, text TEXT, globalTid INTEGER,"
        " endGlobalTid INTEGER, textId INTEGER, domainId INTEGER)"
    )
    for i, (name, start, end) in enumerate(ranges):
        text, tid = (None, 1000 + i) if text_ids else (name, None)
        if text_ids:
            con.execute("INSERT INTO StringIds VALUES (?, ?)", (tid, name))
        con.execute(
            "INSERT INTO NVTX_EVENTS VALUES (?, ?, 59, NULL, NULL, NULL, ?, 1, NULL, ?, 0)",
            (start, end, text, tid),
        )
    con.execute(
        "INSERT INTO NVTX_EVENTS VALUES (5, NULL, 34, NULL, NULL, NULL, 'mark', 1, NULL, NULL, 0)"
    )
    con.commit()
    con.close()
    return path


def three_steps(tmp_path: Path, names: tuple[str, ...] = ("step",) * 3, **kw) -> Path:
    path = make_nsys(tmp_path / "rank0.sqlite", RT, KERNELS, memcpy=COPIES)
    return nvtx(path, [(n, i * 10_000, (i + 1) * 10_000) for i, n in enumerate(names)], **kw)


def rows_of(csv: Path) -> dict[str, tuple[int, float]]:
    df = read_metrics_csv(csv)
    got = df.groupby("metric").agg(calls=("calls", "sum"), total_s=("total_s", "sum"))
    return {m: (int(r.calls), r.total_s) for m, r in got.iterrows()}


def breakdown_of(csv: Path, device: str = "0") -> dict[str, float]:
    df = __import__("pandas").read_csv(csv, dtype={"device": str})
    return {r.quantity: r.seconds for r in df[df["device"] == device].itertuples()}


@pytest.mark.parametrize("text_ids", [False, True])
def test_nsys_one_step_by_hand(tmp_path: Path, capsys, text_ids: bool) -> None:
    path = three_steps(tmp_path, text_ids=text_ids)
    out = tmp_path / "m.csv"
    assert main(["summary", "--range", "step", "--step", "1", "--out", str(out), str(path)]) == 0
    got = rows_of(out)
    for metric, (calls, ns) in STEP_1.items():
        assert got[metric][0] == calls and got[metric][1] == pytest.approx(ns * 1e-9), metric
    assert set(got) == set(STEP_1)  # nothing of steps 0 and 2
    df = read_metrics_csv(out)
    assert df["wall_s"].tolist() == [pytest.approx(10e-6)] * len(df)
    assert set(df["wall_from"]) == {"step 1 (step ranges)"}
    split = breakdown_of(tmp_path / "m.breakdown.csv")
    assert split["window"] == pytest.approx(10e-6) and split["busy"] == pytest.approx(BUSY_1 * 1e-9)
    assert split["comm"] == pytest.approx(COMM_1 * 1e-9)
    assert split["compute"] == pytest.approx(COMPUTE_1 * 1e-9)
    assert split["idle"] == pytest.approx((10_000 - BUSY_1) * 1e-9)
    assert breakdown_of(tmp_path / "m.breakdown.csv", "host")["host_blocked"] == pytest.approx(
        HOST_1 * 1e-9
    )
    text = capsys.readouterr().out
    assert "per step, rank 0:\n  step 1: window 1e-05 s; device 0 busy 5e-06 s (50.0%)," in text
    assert "idle 5e-06 s (50.0%), comm 2e-06 s (20.0%)" in text


def test_nsys_numbered_ranges_and_a_range_of_steps(tmp_path: Path, capsys) -> None:
    # ProfilerStep#N (the default name), numbered from 4; steps 5-6 = [10_000, 30_000)
    path = three_steps(tmp_path, ("ProfilerStep#4", "ProfilerStep#5", "ProfilerStep#6"))
    out = tmp_path / "m.csv"
    assert main(["--run", "r", "--out", str(out), "--step", "5-6", str(path)]) == 0
    got = rows_of(out)
    assert got["cudaLaunchKernel"][0] == 2 and got["memcpy_dtoh"] == (1, pytest.approx(1e-6))
    assert got["nccl_other"] == (1, pytest.approx(2e-6))
    text = capsys.readouterr().out
    assert "wall 0.000 s (steps 5-6 (ProfilerStep ranges))" in text
    step5, step6 = [ln for ln in text.splitlines() if ln.startswith("  step ")]
    assert step5.startswith("  step 5: window 1e-05 s; device 0 busy 5e-06 s (50.0%)")
    # step 6: gemm [20_500, 24_000) and the DtoH copy [25_000, 26_000)
    assert step6.startswith("  step 6: window 1e-05 s; device 0 busy 4.5e-06 s (45.0%)")


def kineto_steps_trace(tmp_path: Path) -> Path:
    """The same job as a Kineto trace (us): three host steps; step 1's GPU range reaches 15 us
    past its host range, where its second kernel runs."""
    ev = kineto_event
    events = [
        ev("user_annotation", "ProfilerStep#0", 0.0, 10.0),
        ev("user_annotation", "ProfilerStep#1", 10.0, 10.0),
        ev("user_annotation", "ProfilerStep#2", 20.0, 10.0),
        ev("gpu_user_annotation", "ProfilerStep#1", 10.5, 25.0),
        ev("cuda_runtime", "cudaLaunchKernel", 0.0, 1.0),
        ev("cuda_runtime", "cudaLaunchKernel", 10.0, 1.0),
        ev("cuda_runtime", "cudaStreamSynchronize", 11.0, 8.5),
        ev("cuda_runtime", "cudaLaunchKernel", 20.0, 1.0),
        ev("kernel", "gemm", 0.5, 3.5, device=0),
        ev("kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 9.0, 3.0, device=0),
        ev("kernel", "gemm", 10.5, 3.5, device=0),
        ev("kernel", "gemm", 30.0, 5.0, device=0),  # step 1's, late on the GPU
        ev("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 14.0, 1.0, device=0, bytes=4096),
        ev("cpu_op", "aten::mm", 12.0, 4.0),
    ]
    return write_trace(tmp_path / "rank0.pt.trace.json.gz", events)


def test_kineto_step_reaches_its_gpu_range(tmp_path: Path, capsys) -> None:
    path = kineto_steps_trace(tmp_path)
    out = tmp_path / "m.csv"
    assert main(["summary", "--step", "1", "--out", str(out), str(path)]) == 0
    got = rows_of(out)
    # window [10, 35.5) us: step 1's host range, then its GPU range's end
    assert read_metrics_csv(out)["wall_s"].iloc[0] == pytest.approx(25.5e-6)
    # host records stay in the host range [10, 20): step 2's launch at 20 is not step 1's
    assert got["cudaLaunchKernel"] == (1, pytest.approx(1e-6))
    assert got["cudaStreamSynchronize"] == (1, pytest.approx(8.5e-6))
    assert got["nccl_other"] == (1, pytest.approx(2e-6))
    assert got["memcpy_htod"] == (1, pytest.approx(1e-6))
    assert got["cpu:aten::mm"] == (1, pytest.approx(4e-6))
    split = breakdown_of(tmp_path / "m.breakdown.csv")
    # [10, 12) u [10.5, 14) u [14, 15) u [30, 35) = 10 us
    assert split["busy"] == pytest.approx(10e-6) and split["comm"] == pytest.approx(2e-6)
    assert "steps" not in capsys.readouterr().out.split("per step")[0].split("wall")[0]


def test_diff_of_one_step(tmp_path: Path, capsys) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = three_steps(tmp_path / "a")
    b = make_nsys(tmp_path / "b" / "rank0.sqlite",
                  [*RT, ("cudaStreamSynchronize_v3020", 19_500, 20_000)], KERNELS, memcpy=COPIES)  # fmt: skip
    nvtx(b, [("step", i * 10_000, (i + 1) * 10_000) for i in range(3)])
    out = tmp_path / "d.csv"
    assert main(["diff", str(a), str(b), "--range", "step", "--step", "1", "--out", str(out)]) == 0
    df = __import__("pandas").read_csv(out)
    sync = df[(df["metric"] == "cudaStreamSynchronize") & (df["field"] == "total_s")].iloc[0]
    assert sync["a"] == pytest.approx(8.5e-6) and sync["b"] == pytest.approx(9e-6)
    wall = df[(df["metric"] == "wall") & (df["field"] == "total_s")].iloc[0]
    assert wall["a"] == wall["b"] == pytest.approx(10e-6)
    assert "breakdown:busy" in set(df["metric"])


def test_bad_steps_one_line_nothing_written(tmp_path: Path) -> None:
    path = three_steps(tmp_path)
    trace = kineto_steps_trace(tmp_path)
    out = tmp_path / "out.csv"
    cases = [
        (["--step", "3", "--range", "step", str(path)], "no step 3 among its step ranges (its steps: 0-2)"),
        (["--step", "7", str(trace)], "no step 7 among its ProfilerStep ranges (its steps: 0-2)"),
        (["--step", "1", "--range", "epoch", str(path)],
         "no NVTX range named 'epoch' or epoch#N (--range NAME); its ranges: 'step' x3"),
        (["--step", "1", str(path)], "no NVTX range named 'ProfilerStep'"),
        (["--step", "2-1", str(path)], "runs backwards"),
        (["--step", "x", str(path)], "must be N or A-B"),
        (["--range", "step", str(path)], "give --step too"),
    ]  # fmt: skip
    for args, needle in cases:
        proc = subprocess.run(
            [sys.executable, "-m", "analysis.profiles.cli", "summary", "--out", str(out), *args],
            cwd=REPO, capture_output=True, text=True,
        )  # fmt: skip
        assert proc.returncode == 2, (args, proc.stderr)
        assert needle in proc.stderr, (args, proc.stderr)
        assert proc.stdout == "" and not out.exists(), args
        if "usage" not in proc.stderr:
            assert proc.stderr.count("\n") == 1, proc.stderr
    csv = tmp_path / "m.csv"
    assert main(["--run", "x", "--out", str(csv), str(path)]) == 0
    proc = subprocess.run(
        [sys.executable, "-m", "analysis.profiles.cli", "diff", str(csv), str(path), "--step", "1"],
        cwd=REPO, capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 2 and "a metrics CSV holds no steps" in proc.stderr


def test_step_numbers_and_spans() -> None:
    assert step_numbers("4") == (4, 4) and step_numbers(" 2 - 9 ") == (2, 9)
    for bad in ("", "-1", "3-", "a", "1-2-3", "5-4"):
        with pytest.raises(ValueError):
            step_numbers(bad)
    assert spans([0, 1, 2, 5, 7, 8]) == "0-2, 5, 7-8" and spans([]) == ""


# --- real files of the corpus --------------------------------------------------------------


def _kineto_events(path: Path) -> list[dict]:
    import gzip

    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    doc = json.loads(raw)
    return doc["traceEvents"] if isinstance(doc, dict) else doc


@pytest.mark.corpus
@pytest.mark.parametrize(
    ("name", "first", "last", "runtime_cat"),
    [
        ("marcalph__kernelforge__transformer_lambda.json", 7, 9, "cuda_runtime"),
        ("pytorch__kineto__resnet50_torch19.json.gz", 17, 18, "Runtime"),
    ],
)
def test_real_kineto_steps_against_an_independent_reading(
    tmp_path: Path, capsys, name: str, first: int, last: int, runtime_cat: str
) -> None:
    path = corpus_file(name)
    events = [e for e in _kineto_events(path) if e.get("ph") == "X"]
    host = {e["name"]: e for e in events if e["name"].startswith("ProfilerStep#")
            and e.get("cat") != "gpu_user_annotation"}  # fmt: skip
    gpu = {e["name"]: e for e in events if e.get("cat") == "gpu_user_annotation"}
    want = [f"ProfilerStep#{n}" for n in range(first, last + 1)]
    lo = host[want[0]]["ts"]
    host_hi = max(host[w]["ts"] + host[w]["dur"] for w in want)  # host records end here
    hi = max([host_hi, *(gpu[w]["ts"] + gpu[w]["dur"] for w in want if w in gpu)])
    launches = [e for e in events if e.get("cat") == runtime_cat and e["name"] == "cudaLaunchKernel"
                and e["ts"] < host_hi and e["ts"] + e["dur"] > lo]  # fmt: skip
    inside = sum(min(e["ts"] + e["dur"], host_hi) - max(e["ts"], lo) for e in launches)
    out = tmp_path / "m.csv"
    assert main(["summary", "--step", f"{first}-{last}", "--out", str(out), str(path)]) == 0
    got = rows_of(out)
    assert got["cudaLaunchKernel"][0] == len(launches) > 0
    # the reader counts in ns, each time rounded (breakdown.py's docstring): within 1 ns a call
    assert got["cudaLaunchKernel"][1] == pytest.approx(inside * 1e-6, abs=1e-9 * len(launches))
    assert read_metrics_csv(out)["wall_s"].iloc[0] == pytest.approx((hi - lo) * 1e-6, abs=2e-9)
    text = capsys.readouterr().out
    lines = [ln for ln in text.splitlines() if ln.startswith("  step ")]
    assert [ln.split(":")[0] for ln in lines] == [f"  step {n}" for n in range(first, last + 1)]
    assert all("busy" in ln and "idle" in ln and "comm" in ln for ln in lines)


@pytest.mark.corpus
def test_real_nsys_nvtx_ranges_against_an_independent_reading(tmp_path: Path, capsys) -> None:
    """ICON's three thrust for_each NVTX ranges, numbered in time order: copies inside them."""
    path = corpus_file("NTHU-SC__ISC25-ICON-C__icon_mpi_osrt.sqlite")
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    ranges = con.execute(
        'SELECT start, "end" FROM NVTX_EVENTS WHERE "end" > start AND COALESCE(text,'
        " (SELECT value FROM StringIds WHERE id = textId)) = 'for_each' ORDER BY start"
    ).fetchall()
    assert len(ranges) == 3
    lo, hi = ranges[1][0], ranges[2][1]
    busy = con.execute(
        'SELECT start, "end" FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE start < ? AND "end" > ?'
        ' UNION ALL SELECT start, "end" FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE start < ? AND "end" > ?',
        (hi, lo, hi, lo),
    ).fetchall()
    con.close()
    union, reach = 0, lo
    for s, e in sorted((max(s, lo), min(e, hi)) for s, e in busy):
        union += max(0, e - max(s, reach))
        reach = max(reach, e)
    out = tmp_path / "m.csv"
    assert (
        main(["summary", "--range", "for_each", "--step", "1-2", "--out", str(out), str(path)]) == 0
    )
    split = breakdown_of(tmp_path / "m.breakdown.csv")
    assert split["window"] == pytest.approx((hi - lo) * 1e-9)
    assert split["busy"] == pytest.approx(union * 1e-9) and union > 0
    assert "  step 1: window" in capsys.readouterr().out


@pytest.mark.corpus
def test_real_nsys_many_ranges_and_one_missing(tmp_path: Path) -> None:
    path = corpus_file("NVIDIA__Fuser__h200_nvtx.sqlite")
    ((_, prof, _, each),) = load([path], choice=Choice(3, 4, "ExpressionEvaluator::evaluate"))
    assert prof.wall_from == "steps 3-4 (ExpressionEvaluator::evaluate ranges)"
    assert [s.number for s, _ in each] == [3, 4]
    with pytest.raises(StepError, match=r"no step 430 among .* \(its steps: 0-429\)"):
        load([path], choice=Choice(430, 430, "ExpressionEvaluator::evaluate"))
