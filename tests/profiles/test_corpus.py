"""The corpus tier (issue 37 item 3): every real profile under ../shared/profiles/ (SOURCES.md),
made by others, read by the reader and checked against an independent reading written for the test
(corpus_reading.py: standard library only, no import of analysis/), and against the counts
SOURCES.md gives. Skipped with its reason where the corpus is absent; seconds to run.

Per file: calls, seconds and bytes per metric, the CPU ops' calls and time, the wall and where it
came from, the records outside the nsys session, every device's busy, compute, comm and
comm-not-overlapped time and the host's blocked time, and the breakdown's shares. Invariants on
every file: the breakdown's window is the wall; no share above 1 of its device's window; GPU busy
never above the window; the kernel count is the kernel table's rows (the trace's kernel events);
the records outside the session named on the summary line.
"""

from __future__ import annotations

import gzip
import re
import sqlite3
from collections import defaultdict
from contextlib import closing
from pathlib import Path

import pytest
from corpus_files import ABSENT, CORPUS, corpus_files
from corpus_reading import kineto_figures, nsys_figures
from profile_builders import cli_fails

from analysis.profiles import ProfileError, read_profile_breakdown
from analysis.profiles import breakdown as bd
from analysis.profiles.cli import main

pytestmark = [pytest.mark.corpus, pytest.mark.skipif(CORPUS is None, reason=ABSENT)]

FILES = corpus_files("nsys") + corpus_files("kineto")
# Files a reader may refuse, with the words of its one line (none so far: all are read).
REFUSED: dict[str, str] = {
    "ZhangXin8069__qcu__mpirun_no_cuda_tables.sqlite": "nsys export without CUDA tables",
    "facebookresearch__HolisticTraceAnalysis__mtia_inference_rank0.json.gz": (
        "no GPU events this reader knows, but GPU-like events of categories mtia_ccp_events,"
        " mtia_runtime (categories found: Trace, cpu_op, mtia_ccp_events, mtia_runtime,"
        " user_annotation)"
    ),
}
# What SOURCES.md says of each file, written by whoever collected it, not by this reader:
# kernels, copies and memsets (nsys table rows, Kineto events); None where it says nothing.
SOURCES = {
    "bwyogatama__Mordred-Deprecated__mordred_2021.sqlite": (12, 188, 16),
    "PolPuigPuy__OpenACC_Project_PolPuig__openacc_report12.sqlite": (1934, 1949, 2),
    "randreshg__Offloading__offload_2021_5.sqlite": (1, 2, 0),
    "MohanadOdema__DLProf__dlprof_2022_1.sqlite": (46, 12, 4),
    "Ther-LF__QuantPSelInvPlus__pselinv_2proc.sqlite": (464 + 421, 1465, 45),
    "mamedov-artem-rafaelevich__parallel_course_2__v100x4_2022_4.sqlite": (1000, 4, 3),
    "tomarriott__GTLS__gtls_23k_kernels.sqlite": (23_419, 5105, 1),
    "wenscarl__cutlass_benchmark__mixed_4gpu.sqlite": (6, 4, 0),
    "RajaATAli__SC23_Programming-Your-GPU-with-OpenMP_Tutorial__openmp_t4.sqlite": (50, 200, 0),
    "IllusiveAldebaran__nussinov-gpu__a30_mig.sqlite": (1, 5, 0),
    "SamuelAmsih__CUDA__jetson_orin.sqlite": (1668, 833, 417),
    "NVIDIA__Fuser__h200_nvtx.sqlite": (19, 1, 1),
    "danae-pan__hpc_assignment3__h100x2.sqlite": (6, 7, 0),
    "NTHU-SC__ISC25-ICON-C__icon_mpi_osrt.sqlite": (7, 5511, 0),
    "florianmattana__CUDA-Kernels__windows_2025_5.sqlite": (2102, 4, 4),
    "ZhangXin8069__qcu__mpirun_2024_1_no_kernels.sqlite": (0, 0, 0),
    "GindaChen__nsys-ai__h100_2gpu_2026_2.sqlite": (3442, 904, 22),
    "GindaChen__nsys-ai__mfu_2gpu_nccl_before.sqlite": (4010, 1020, 269),
    "GindaChen__nsys-ai__mfu_2gpu_nccl_after.sqlite": (3587, 904, 242),
    "GindaChen__nsys-ai__other_clock_2026_1.sqlite": (2, 1, 0),
    "pytorch__kineto__resnet50_torch19.json.gz": (8772, None, None),
    "pytorch__kineto__resnet50_bare_array_2021.json.gz": (9538, None, None),
    "pytorch__kineto__libkineto_before_fix.json": (1, None, None),
    "deepseek-ai__profile-data__train_ep64.json": (963, None, None),
    "AMD-AGI__TraceLens__b200_eager_rank0.json.gz": (768, 161, None),
    "AMD-AGI__TraceLens__rocm_sglang_decode.json.gz": (555, None, None),
    "harryjmoss__particle_transformer__gpu_working.json": (549, 11, None),
    "marcalph__kernelforge__transformer_lambda.json": (48, None, None),
    "JeremyMorlier__GPUModel__tiny_trace.json": (5, None, None),
    "facebookresearch__HolisticTraceAnalysis__nccl128_sampled_rank0.json.gz": (1154, 40, 10),
    "facebookresearch__HolisticTraceAnalysis__nccl128_sampled_rank1.json.gz": (1104, 40, 10),
    "facebookresearch__HolisticTraceAnalysis__mi250_rocm6_2.json.gz": (14, 2, None),
    "facebookresearch__HolisticTraceAnalysis__runtime_kernel_rank1.json.gz": (4, None, None),
    "facebookresearch__HolisticTraceAnalysis__cpu_only_rank0.json.gz": (0, 0, 0),
}
# SOURCES.md: kernels that start before ANALYSIS_DETAILS.startTime
KERNELS_BEFORE = {
    "mamedov-artem-rafaelevich__parallel_course_2__v100x4_2022_4.sqlite": 23,
    "NVIDIA__Fuser__h200_nvtx.sqlite": 2,
}
NSYS_DEFAULT = "nsys default: whole session (the export records no capture settings)"
WHY = {"default": NSYS_DEFAULT, "duration": "META_DATA_CAPTURE: duration",
       "whole run": "META_DATA_CAPTURE: whole run"}  # fmt: skip
_cache: dict[Path, tuple] = {}


def read_both(path: Path) -> tuple:
    """(profile, breakdown, independent figures), read once per file for all its tests."""
    if path not in _cache:
        indep = nsys_figures(path) if path.parent.name == "nsys" else kineto_figures(path)
        _cache[path] = (*read_profile_breakdown(path), indep)
    return _cache[path]


def by_metric(rows) -> dict[str, tuple[int, float, int]]:
    out: dict[str, list] = defaultdict(lambda: [0, 0.0, 0])
    for r in rows:
        out[r.metric][0] += r.calls
        out[r.metric][1] += r.total_s
        out[r.metric][2] += r.bytes or 0
    return {m: tuple(v) for m, v in out.items()}


def test_every_file_there_has_its_counts_and_its_row() -> None:
    """Each file of the folder is named in SOURCES.md and has its counts here; a copy of the
    corpus that lacks some of the files named here (an older ../shared/profiles) tests the rest."""
    names = {p.name for p in FILES}
    assert len(names) >= 20, sorted(names)
    assert names <= set(SOURCES) | set(REFUSED), sorted(names - set(SOURCES) - set(REFUSED))
    listed = (CORPUS / "SOURCES.md").read_text()
    assert all(f"| {name} |" in listed for name in names), "a file without its SOURCES.md row"


def test_two_ranks_of_one_nccl_job(tmp_path: Path, capsys) -> None:
    """Two ranks of a 128-rank NCCL job in one command: each takes the rank its trace records,
    and each device's NCCL kernels are its communication time."""
    files = [_real(f"facebookresearch__HolisticTraceAnalysis__nccl128_sampled_rank{r}.json.gz")
             for r in (1, 0)]  # fmt: skip
    out = tmp_path / "m.csv"
    assert main(["--run", "nccl128", "--out", str(out), *map(str, files)]) == 0
    text = capsys.readouterr().out
    assert "rank 0 [torch]" in text and "rank 1 [torch]" in text
    for rank, path in ((1, files[0]), (0, files[1])):
        prof, split, indep = read_both(path)
        assert prof.rank_hint == rank and list(split.devices) == [rank]
        assert split.devices[rank].comm == indep["devices"][rank]["comm"] > 0
        assert by_metric(prof.rows)["nccl_other"][0] == 10


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_read_or_refused_in_one_line(path: Path, tmp_path: Path, capsys) -> None:
    """The command line on the file: read (exit 0, a summary, both CSVs) or refused (exit 1, one
    line naming the file, nothing written); never 0 rows with exit 0."""
    out = tmp_path / "m.csv"
    code = main(["--run", "corpus", "--out", str(out), str(path)])
    captured = capsys.readouterr()
    if path.name in REFUSED:
        lines = captured.err.strip().splitlines()
        assert code == 1 and len(lines) == 1 and REFUSED[path.name] in lines[0]
        assert not list(tmp_path.iterdir())
        return
    assert code == 0, captured.err
    assert not captured.err.strip() or captured.err.startswith("warning: ")
    wrote = captured.out.strip().splitlines()[-1]
    assert wrote.startswith("wrote ") and not wrote.startswith("wrote 0 rows"), wrote
    prof, _, indep = read_both(path)
    first = captured.out.splitlines()[0]
    assert f"({prof.wall_from})" in first  # the records outside the session named there
    label = "[torch, HIP/ROCm]" if prof.device_kind == "HIP/ROCm" else f"[{prof.source}]"
    assert label in first and (("CUDA activity" in first) == (prof.device_kind != "HIP/ROCm"))
    assert prof.device_kind == indep.get("device_kind", "CUDA")


@pytest.mark.parametrize("path", [p for p in FILES if p.name not in REFUSED], ids=lambda p: p.name)
def test_figures_match_the_independent_reading(path: Path) -> None:
    prof, split, indep = read_both(path)
    got = by_metric(r for r in prof.rows if not r.metric.startswith("cpu:"))
    want = {m: v for m, v in indep["metrics"].items() if v[0]}
    assert set(got) == set(want)
    for metric, (calls, ns, nbytes) in want.items():
        assert got[metric][0] == calls, metric
        assert got[metric][1] == pytest.approx(ns / 1e9, rel=1e-9, abs=1e-12), metric
        assert got[metric][2] == nbytes, metric
    ops = {r.raw_name: (r.calls, r.total_s) for r in prof.rows if r.metric.startswith("cpu:")}
    for name, (calls, ns) in indep.get("cpu_ops", {}).items():
        assert ops[name][0] == calls and ops[name][1] == pytest.approx(ns / 1e9, abs=1e-12), name
    # the wall, where it came from, and the records outside the nsys session
    lo, hi = indep["wall"]
    assert abs(split.window[0] - lo) <= 1 and abs(split.window[1] - hi) <= 1
    assert prof.wall_s == pytest.approx((hi - lo) / 1e9, abs=2e-9)
    assert prof.wall_from.startswith(indep["wall_from"])
    assert prof.outside == indep["outside"]
    # every device's unions, the host's, and the shares of the window
    assert set(split.devices) == set(indep["devices"])
    for dev, t in split.devices.items():
        mine = indep["devices"][dev]
        assert (t.busy, t.compute, t.comm, t.comm_not_overlapped) == (
            mine["busy"], mine["compute"], mine["comm"], mine["comm_not_overlapped"]), dev  # fmt: skip
        n = split.counts[dev]
        assert (n.kernels, n.copies, n.memsets) == (
            mine["kernels"],
            mine["copies"],
            mine["memsets"],
        )
    assert split.host_blocked == indep["host_blocked"]
    frame = bd.breakdown_frame("corpus", 0, split)
    for row in frame.itertuples():
        if row.device != bd.HOST and row.quantity in ("busy", "compute", "comm"):
            ns = indep["devices"][int(row.device)][row.quantity]
            assert row.share_of_window == pytest.approx(ns / (hi - lo), rel=1e-6, abs=1e-9)


@pytest.mark.parametrize("path", [p for p in FILES if p.name not in REFUSED], ids=lambda p: p.name)
def test_invariants(path: Path) -> None:
    prof, split, indep = read_both(path)
    assert split.window_ns > 0 and split.window_from == prof.wall_from
    assert split.window_ns / 1e9 == pytest.approx(prof.wall_s, abs=1e-12)  # window is the wall
    frame = bd.breakdown_frame("corpus", 0, split)
    assert (frame["share_of_window"] <= 1).all() and (frame["share_of_window"] >= 0).all()
    assert all(t.busy <= split.window_ns for t in split.devices.values())
    assert sum(n.kernels for n in split.counts.values()) == indep["kernel_rows"]
    for r in prof.rows:  # a CPU op's time is inside the window
        assert not r.metric.startswith("cpu:") or r.total_s <= prof.wall_s + 1e-9, r.raw_name
    one = {"kernels": "kernel", "calls": "call", "copies": "copy", "memsets": "memset"}
    for kind, n in prof.outside.items():  # counted and named: "23 kernels", "1 copy", ...
        assert re.search(rf"\b{n} {one[kind] if n == 1 else kind}\b", prof.wall_from), kind
    activity = split.activity
    if activity != (0, 0):  # (0, 0): no GPU activity at all
        assert split.window[0] <= activity[0] and activity[1] <= split.window[1]


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_counts_sources_md_gives(name: str) -> None:
    """The collector's counts, read by neither reading: both agree with them."""
    path = next((p for p in FILES if p.name == name), None)
    if path is None:
        pytest.skip(f"{name} not in {CORPUS}")
    prof, split, indep = read_both(path)
    kernels, copies, memsets = SOURCES[name]
    devices = indep["devices"].values()
    assert sum(n.kernels for n in split.counts.values()) == indep["kernel_rows"] == kernels
    if copies is not None:
        assert sum(n.copies for n in split.counts.values()) == copies
        assert sum(d["copies"] for d in devices) == copies
    if memsets is not None:
        assert sum(n.memsets for n in split.counts.values()) == memsets
    if name in KERNELS_BEFORE:
        assert prof.outside["kernels"] == indep["outside"]["kernels"] == KERNELS_BEFORE[name]


def test_capture_and_wall_per_nsys_file() -> None:
    """Where each export's wall came from, by the independent reading of its capture table."""
    for path in corpus_files("nsys"):
        if path.name in REFUSED:
            continue
        prof, _, indep = read_both(path)
        if indep["wall_from"] == "ANALYSIS_DETAILS session":
            expect = {"duration", "whole run", "default"}
            assert any(prof.wall_from.startswith(f"ANALYSIS_DETAILS session ({WHY[w]})")
                       for w in expect), prof.wall_from  # fmt: skip
        else:
            assert prof.wall_from.startswith("CUDA activity span ("), prof.wall_from


def test_refusals_are_one_line() -> None:
    there = {p.name: p for p in FILES}
    if not set(REFUSED) & set(there):
        pytest.skip(f"none of {sorted(REFUSED)} in {CORPUS}")
    for name, needle in REFUSED.items():
        if name not in there:
            continue
        path = there[name]
        with pytest.raises(ProfileError, match=re.escape(needle)):
            read_profile_breakdown(path)


def _real(name: str) -> Path:
    path = next((p for p in FILES if p.name == name), None)
    if path is None:
        pytest.skip(f"{name} not in {CORPUS}")
    return path


def _fails_in_one_line(folder: Path, good: Path, bad: Path, needle: str, capsys) -> None:
    """profile_builders.cli_fails in this process (a subprocess per case is seconds more): exit 1,
    one stderr line naming the bad file and `needle`, the older CSV untouched, nothing left."""
    out = folder / "metrics.csv"
    out.write_text("previous,content\n")
    assert main(["--run", "x", "--out", str(out), str(good), str(bad)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(bad) in err[0] and needle in err[0], err
    assert out.read_text() == "previous,content\n"
    assert {p.name for p in folder.iterdir()} == {"metrics.csv", good.name, bad.name}


def test_bad_input_made_of_real_files(tmp_path: Path, capsys) -> None:
    """Real files damaged in a temporary folder: one line, exit 1, nothing written."""
    export = _real("NVIDIA__Fuser__h200_nvtx.sqlite").read_bytes()
    trace = _real("AMD-AGI__TraceLens__rocm_sglang_decode.json.gz").read_bytes()
    cases = {
        "truncated export": (export[: len(export) // 2], ".sqlite", "corrupt or truncated SQLite"),
        "truncated gzip": (trace[: len(trace) // 2], ".json.gz", "truncated or corrupt gzip"),
        "gzip of no JSON": (gzip.compress(export), ".json.gz", "not UTF-8 text"),
        "trace cut short": (gzip.compress(gzip.decompress(trace)[:-500]), ".json.gz",
                            "truncated JSON"),
    }  # fmt: skip
    for case, (data, suffix, needle) in cases.items():
        folder = tmp_path / case.replace(" ", "_")
        folder.mkdir()
        good = folder / f"rank0{suffix}"
        good.write_bytes(export if suffix == ".sqlite" else trace)
        bad = folder / f"rank1{suffix}"
        bad.write_bytes(data)
        _fails_in_one_line(folder, good, bad, needle, capsys)
    # a real capture table made to contradict itself: START_TRIGGER given a second value
    folder = tmp_path / "contradiction"
    folder.mkdir()
    good, bad = folder / "rank0.sqlite", folder / "rank1.sqlite"
    good.write_bytes(export)
    bad.write_bytes(export)
    with closing(sqlite3.connect(bad)) as con, con:
        con.execute("INSERT INTO META_DATA_CAPTURE VALUES ('START_TRIGGER', 'cudaProfilerApi')")
    needle = (
        "META_DATA_CAPTURE contradicts itself: START_TRIGGER is 'Immediate' and 'cudaProfilerApi'"
    )
    _fails_in_one_line(folder, good, bad, needle, capsys)
    # one subprocess, as a user runs it: the same one line and exit status
    cli_fails(folder, good, bad, needle)


def test_diff_of_a_real_pair_and_of_unrelated_jobs(tmp_path: Path, capsys) -> None:
    """kineto's own ResNet-50 sample, as torch 1.8 and torch 1.9 wrote it, is a before/after
    pair; an nsys export beside a Kineto trace is refused in one line (exit 2), nothing written."""
    before = _real("pytorch__kineto__resnet50_bare_array_2021.json.gz")
    after = _real("pytorch__kineto__resnet50_torch19.json.gz")
    out = tmp_path / "d.csv"
    assert main(["diff", str(before), str(after), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "cudaLaunchKernel" in text and out.is_file()
    out.unlink()
    export = _real("NVIDIA__Fuser__h200_nvtx.sqlite")
    assert main(["diff", str(export), str(after), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "different profilers" in err[0]
    assert not out.exists() and not list(tmp_path.iterdir())


def test_readme_version_table_names_every_corpus_file() -> None:
    """Item 5: every corpus file is a golden test of a row of the README's version table, and
    records that row's version (nsys release, Kineto schema); none gets a newer-version warning."""
    from test_versions import readme_corpus_files

    named = readme_corpus_files()
    assert {p.name for p in FILES} <= set(named), sorted({p.name for p in FILES} - set(named))
    for path in FILES:
        kind, version = named[path.name]
        if kind == "nsys SQLite export":
            assert _release(path).startswith(version) or version == "before 2021.5", path.name
        elif "schema 1" in version:
            raw = path.read_bytes()
            head = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
            assert re.search(rb'"schemaVersion":\s*1\b', head[:4096]), path.name
        elif version.startswith("torch 1.8"):  # its bare array
            assert _first_char(path) == "["
        if path.name not in REFUSED:
            assert not read_both(path)[0].version_note, path.name


def _release(path: Path) -> str:
    with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as con:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master")}
        for table in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
            if table in tables:
                sql = f"SELECT value FROM {table} WHERE name = 'EXPORT_PRODUCT_VERSION'"
                return con.execute(sql).fetchone()[0]
    return ""


def _first_char(path: Path) -> str:
    raw = path.read_bytes()
    text = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
    return text.lstrip()[:1].decode()


def test_diff_of_a_real_nsys_pair(tmp_path: Path, capsys) -> None:
    """A 2-rank torchrun job with NCCL before and after a change (nsys 2026.2, both ranks in one
    export): the diff compares the NCCL kernels' time and the breakdown's communication."""
    before = _real("GindaChen__nsys-ai__mfu_2gpu_nccl_before.sqlite")
    after = _real("GindaChen__nsys-ai__mfu_2gpu_nccl_after.sqlite")
    out = tmp_path / "d.csv"
    assert main(["diff", str(before), str(after), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "nccl_other" in text and "breakdown:comm" in text and out.is_file()
    for path, calls in ((before, 66), (after, 62)):
        prof, split, indep = read_both(path)
        assert by_metric(prof.rows)["nccl_other"][0] == calls == indep["metrics"]["nccl_other"][0]
        assert sorted(split.devices) == [0, 1] and all(t.comm > 0 for t in split.devices.values())
