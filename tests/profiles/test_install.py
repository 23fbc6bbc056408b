"""Issue 37 item 4: the reader anyone can install (`pip install .`) and its pandas-free reading.

The wheel is built from a copy of the checkout and installed into a fresh venv without network
(`pip wheel --no-build-isolation --no-index`, `pip --python VENV install --no-deps --no-index`);
numpy, its one dependency, is lent from this interpreter through a .pth file naming a folder
that holds numpy alone, so the venv has no pandas, no torch and nothing of the artifact.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from profile_builders import REPO, gpu_trace_events, kineto_event, make_nsys, write_trace

from analysis.profiles import breakdown as bd
from analysis.profiles import load
from analysis.profiles.cli import main
from analysis.profiles.metrics import profile_rows, read_metrics_rows, sort_rows

RT = [("cudaLaunchKernel_v7000", 0, 1_000), ("cudaStreamSynchronize_v3020", 1_000, 9_000)]
KERNELS = [("gemm", 500, 4_000), ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 3_000, 6_000)]


def _files(tmp_path: Path) -> dict[str, Path]:
    """A two-rank nsys job, a Kineto trace (gzip) and a CPU-only trace."""
    (tmp_path / "cpu").mkdir(parents=True, exist_ok=True)
    out = {f"nsys{r}": make_nsys(tmp_path / f"rank{r}.sqlite", RT, KERNELS) for r in (0, 1)}
    out["kineto"] = write_trace(tmp_path / "rank0.pt.trace.json.gz", gpu_trace_events())
    cpu = [
        kineto_event("cpu_op", "aten::mm", 0.0, 9.0),
        kineto_event("cpu_op", "aten::add", 9.0, 1.0),
    ]
    out["cpu"] = write_trace(tmp_path / "cpu" / "rank3.pt.trace.json", cpu)
    return out


def _plain(frame: pd.DataFrame) -> list[tuple]:
    """A frame's rows as tuples, its NA and NaN as None."""
    rows = frame.astype(object).itertuples(index=False, name=None)
    return [tuple(None if v is None or v is pd.NA or v != v else v for v in t) for t in rows]


@pytest.mark.parametrize("which", [("nsys0", "nsys1"), ("kineto",), ("cpu",), ("nsys0", "kineto")])
def test_the_csvs_read_back_by_pandas_are_the_rows(tmp_path: Path, which: tuple[str, ...]) -> None:
    """The CLI's two CSVs, read by pandas, hold the reader's rows."""
    made = _files(tmp_path)
    files = [made[w] for w in which]
    out = tmp_path / "out" / "metrics.csv"
    assert main(["--run", "job", "--out", str(out), *map(str, files)]) == 0
    both = load(files)
    rows = sort_rows(row for r, p, *_ in both for row in profile_rows("job", r, p))
    # (pandas reads an empty text as NA: a CPU-only trace's device_kind "")
    assert _plain(pd.read_csv(out)) == [
        tuple(None if v is None or v != v or v == "" else v for v in r) for r in rows
    ]
    split = [row for r, _, b, _ in both for row in bd.breakdown_rows("job", r, b)]
    table = pd.read_csv(out.parent / "metrics.breakdown.csv", dtype={"device": str})
    assert _plain(table) == [tuple(None if v != v else v for v in r) for r in split]


_NO_PANDAS = """
import sys
from analysis.profiles.cli import main
codes = [main(a) for a in {runs}]
print(codes, sorted(m for m in ("pandas", "torch", "yaml") if m in sys.modules))
"""


def test_reading_imports_no_pandas(tmp_path: Path) -> None:
    f = _files(tmp_path)
    runs = [
        ["--run", "x", "--out", str(tmp_path / "m.csv"), str(f["nsys0"]), str(f["nsys1"])],
        ["summary", "--step", "1", str(f["kineto"])],
        ["breakdown", "--out", str(tmp_path / "b.csv"), str(f["nsys0"])],
        ["diff", f"{f['nsys0']},{f['nsys1']}", str(tmp_path / "m.csv")],
    ]
    code = _NO_PANDAS.format(runs=json.dumps(runs))
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "[0, 0, 0, 0] []"


def test_commands_write_only_what_is_asked(tmp_path: Path, capsys) -> None:
    f = _files(tmp_path)
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        before = sorted(p.name for p in tmp_path.iterdir())
        assert main(["summary", str(f["nsys0"])]) == 0
        assert main(["breakdown", str(f["kineto"])]) == 0
        assert sorted(p.name for p in tmp_path.iterdir()) == before  # printed, nothing written
    finally:
        os.chdir(cwd)
    text = capsys.readouterr().out
    assert "rank 0 [nsys]" in text and "breakdown rank 0 (torch)" in text
    assert (
        "wrote" not in text
        and "cudaStreamSynchronize" not in text.split("breakdown rank 0 (nsys)")[1]
    )
    # --run defaults to the name of --out; breakdown --out writes the breakdown CSV alone
    assert main(["summary", "--out", str(tmp_path / "myjob.csv"), str(f["nsys0"])]) == 0
    assert {r.run for r in read_metrics_rows(tmp_path / "myjob.csv")} == {"myjob"}
    assert (tmp_path / "myjob.breakdown.csv").is_file()
    assert main(["breakdown", "--out", str(tmp_path / "split.csv"), str(f["nsys0"])]) == 0
    assert (tmp_path / "split.csv").read_text().startswith(",".join(bd.COLUMNS) + "\n")
    assert not (tmp_path / "split.breakdown.csv").exists()


def test_no_command_is_usage_exit_2(capsys) -> None:
    assert main([]) == 2
    err = capsys.readouterr().err
    assert "{summary,breakdown,diff}" in err and "breakdown FILE..." in err


# --- the installed command ---------------------------------------------------------------


def _run(cmd: list, **kw) -> subprocess.CompletedProcess:
    # as a user runs the installed reader: the checkout is not on the path (`make test` exports
    # PYTHONPATH=<checkout>, which would lend the installed python the checkout's run/)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env, **kw)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, Path]:
    """(the fresh venv's bin folder, the wheel) with the checkout installed, offline."""
    if importlib.util.find_spec("setuptools") is None:
        pytest.skip("no setuptools in this interpreter to build the wheel offline")
    help_text = _run([sys.executable, "-m", "pip", "--help"]).stdout
    if "--python" not in help_text:
        pytest.skip("this pip has no --python (pip >= 22.3) to install into another venv")
    tmp = tmp_path_factory.mktemp("install")
    src = tmp / "src"
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    for part in ("analysis", "run"):
        shutil.copytree(REPO / part, src / part, ignore=skip)
    shutil.copy(REPO / "pyproject.toml", src)
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                  "--no-index", "-w", tmp / "wheels", src])  # fmt: skip
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = (tmp / "wheels").glob("*.whl")
    venv = tmp / "venv"
    made = _run([sys.executable, "-m", "venv", "--without-pip", venv])
    if made.returncode != 0:
        pytest.skip(f"cannot make a venv here: {made.stderr.strip().splitlines()[-1:]}")
    python = venv / "bin" / "python"
    done = _run([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps",
                 "--no-index", wheel])  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    # numpy alone, lent: a folder holding links to this interpreter's numpy, named by a .pth
    lent = tmp / "numpy_only"
    lent.mkdir()
    np_dir = Path(np.__file__).parent
    for part in [np_dir, np_dir.with_name("numpy.libs"), *np_dir.parent.glob("numpy-*.dist-info")]:
        if part.exists():
            (lent / part.name).symlink_to(part)
    site = _run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
    Path(site.stdout.strip(), "numpy_only.pth").write_text(f"{lent}\n")
    return venv / "bin", wheel


def test_wheel_holds_the_reader_only(installed) -> None:
    _, wheel = installed
    names = set(zipfile.ZipFile(wheel).namelist())
    code = {n for n in names if n.endswith(".py")}
    reader = {f"analysis/profiles/{p.name}" for p in (REPO / "analysis/profiles").glob("*.py")}
    assert code == reader  # nothing of run/: no top-level `run` in the user's site-packages
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    assert "profread = analysis.profiles.cli:console" in zipfile.ZipFile(wheel).read(entry).decode()
    meta = next(n for n in names if n.endswith("METADATA"))
    requires = [ln for ln in zipfile.ZipFile(wheel).read(meta).decode().splitlines()
                if ln.startswith("Requires-Dist:")]  # fmt: skip
    assert requires == [
        "Requires-Dist: numpy>=1.24",
        'Requires-Dist: msgspec>=0.18; extra == "fast"',
    ]


def test_installed_command_reads_summarises_and_diffs(installed, tmp_path: Path) -> None:
    bindir, _ = installed
    f = _files(tmp_path / "in")
    work = tmp_path / "work"  # outside the checkout: nothing of it on the path
    work.mkdir()

    def cmd(*args) -> subprocess.CompletedProcess:
        return _run([bindir / "profread", *args], cwd=work)

    assert _run([bindir / "python", "-c", "import pandas"], cwd=work).returncode != 0
    assert _run([bindir / "python", "-c", "import run"], cwd=work).returncode != 0
    assert _run([bindir / "python", "-c", "import msgspec"], cwd=work).returncode != 0  # json reads
    got = cmd("summary", "--out", "m.csv", f["nsys0"], f["nsys1"])
    assert got.returncode == 0, got.stderr
    assert "rank 1 [nsys]" in got.stdout and "breakdown rank 1 (nsys)" in got.stdout
    ours = tmp_path / "ours.csv"  # the checkout's CLI on the same files: the same bytes
    assert main(["--run", "m", "--out", str(ours), str(f["nsys0"]), str(f["nsys1"])]) == 0
    assert (work / "m.csv").read_bytes() == ours.read_bytes()
    assert (work / "m.breakdown.csv").read_bytes() == ours.with_name(
        "ours.breakdown.csv"
    ).read_bytes()
    got = cmd("breakdown", f["kineto"])
    assert got.returncode == 0 and "device 0 (" in got.stdout and "busy" in got.stdout, got.stderr
    got = cmd("summary", "--step", "1", f["kineto"])  # ProfilerStep#1 (steps.py)
    assert got.returncode == 0 and "per step, rank 0:\n  step 1: window" in got.stdout, got.stderr
    got = cmd("diff", f"{f['nsys0']},{f['nsys1']}", "m.csv", "--fail-if", "1")
    assert got.returncode == 0 and "breakdown:busy" in got.stdout, got.stderr
    # the artifact's command-less form, as the Makefile calls it, works installed too
    got = _run([bindir / "python", "-m", "analysis.profiles.cli", "--run", "x", "--out", "x.csv",
                f["kineto"]], cwd=work)  # fmt: skip
    assert got.returncode == 0 and (work / "x.csv").is_file(), got.stderr
    # bad input: one line, exit 1, nothing written
    bad = work / "rank2.pt.trace.json"
    bad.write_text('{"traceEvents": [')
    got = cmd("summary", "--out", "bad.csv", f["nsys0"], bad)
    assert (got.returncode, got.stdout) == (1, "")
    assert got.stderr.count("\n") == 1 and got.stderr.startswith(f"error: {bad}")
    assert not (work / "bad.csv").exists()
    got = cmd()
    assert got.returncode == 2 and "usage: profread {summary,breakdown,diff}" in got.stderr
    # a folder is an artifact's run folder, read in the checkout only: one line, exit 1
    got = cmd("diff", work, "m.csv")
    assert (got.returncode, got.stdout) == (1, "") and got.stderr.count("\n") == 1, got.stderr
    assert "run folder" in got.stderr and "name its profile files" in got.stderr
