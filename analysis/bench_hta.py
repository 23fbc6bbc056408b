"""The profile reader as a user runs it, beside Holistic Trace Analysis (`make bench-analysis`).

Whole commands, each a process from start to exit with its imports, so that what is compared is
what a user waits for and the memory the machine must have:
  - start-up: `python -m analysis.profiles.cli summary` on a generated Kineto trace of about
    STARTUP_KB KB, beside `python -c pass`; verdict: median <= STARTUP_LIMIT_S;
  - HTA: pairs of our summary and HTA's TraceAnalysis plus its temporal breakdown (the summary's
    counterpart) on HTA's own test trace (HTA_TRACE_SOURCE), in alternating order; verdict on
    the medians of the pairs' ratios: time <= HTA_TIME_RATIO, peak RSS <= HTA_MEMORY_RATIO.
HTA runs in its own venv (HTA_PYTHON); it is never a dependency of this project.
Our commands run with their bytecode cached, as a user's do (pip compiles an installed package's
at install, Python caches a checkout's at the first run): in a temporary folder, after one run
not counted, whatever PYTHONDONTWRITEBYTECODE says (set, every run would compile the reader
first). The lines name the decoder that read the trace's events (analysis/profiles/kineto_fast.py:
the optional msgspec where installed, else json); with msgspec installed, each pair also runs our
summary with json alone (msgspec hidden from it), printed beside as information.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from analysis.profiles import kineto_fast
from run import settings

REPO = Path(__file__).resolve().parents[1]
HTA_ENV = "HTA_PYTHON"
HTA_TRACE_ENV = "HTA_TRACE"
# HTA's own test trace the issue measures against (53.7 MB of JSON): repository, commit, path.
HTA_TRACE_SOURCE = (
    "facebookresearch/HolisticTraceAnalysis",
    "f4d0062c382f42bd8a74838bcdad1916c7d5d2da",
    "tests/data/df_index_resolver/df_index_resolver.json.gz",
)
HTA_TIME_RATIO = 1 / 7  # ours / HTA, whole commands on HTA's trace
HTA_MEMORY_RATIO = 1 / 5
STARTUP_LIMIT_S = 0.3
STARTUP_KB = 10
RUNS = 5
OURS = [sys.executable, "-m", "analysis.profiles.cli", "summary"]
# Our summary with msgspec hidden (`import msgspec` fails), so that json decodes every batch.
_JSON_ONLY = (
    "import runpy, sys; sys.modules['msgspec'] = None; sys.argv[0] = 'analysis.profiles.cli';"
    " runpy.run_module('analysis.profiles.cli', run_name='__main__', alter_sys=True)"
)
OURS_JSON = [sys.executable, "-c", _JSON_ONLY, "summary"]

# Run in the HTA interpreter: HTA reads a folder of traces, so the file is linked into one.
_HTA_CHILD = """
import json, os, sys, tempfile, time
start = time.perf_counter()
from importlib.metadata import version
from hta.trace_analysis import TraceAnalysis
imported = time.perf_counter()
with tempfile.TemporaryDirectory() as d:
    os.symlink(sys.argv[1], os.path.join(d, os.path.basename(sys.argv[1])))
    analysis = TraceAnalysis(trace_dir=d)
    parsed = time.perf_counter()
    analysis.get_temporal_breakdown(visualize=False)
    done = time.perf_counter()
print(json.dumps({"version": version("HolisticTraceAnalysis"), "import_s": imported - start,
                  "parse_s": parsed - imported, "breakdown_s": done - parsed}))
"""


# Runs a command as its parent: forked from this small process, the command's ru_maxrss is its own.
# Forked from the benchmark itself and exec'd, it would also count the benchmark's memory (Linux
# keeps the high-water mark of the address space that exec replaces, and so would a shell's).
_LAUNCHER = """
import os, sys, time
start = time.perf_counter()
pid = os.fork()
if pid == 0:
    try:
        os.execvp(sys.argv[2], sys.argv[2:])
    finally:
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as fh:
    cpu = usage.ru_utime + usage.ru_stime
    fh.write(f"{time.perf_counter() - start} {cpu} {usage.ru_maxrss}")
sys.exit(os.waitstatus_to_exitcode(status))
"""


def cached_bytecode(folder: Path) -> dict[str, str]:
    """The environment our commands run in: bytecode written to and read from `folder`."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {**env, "PYTHONPYCACHEPREFIX": str(folder)}


def command(cmd: Sequence[str], env: dict[str, str] | None = None) -> dict:
    """One command from start to exit: seconds, CPU seconds (user + system: what it costs on a
    machine others load too), its peak RSS in MB, its output (stderr too). RuntimeError, with
    the output's end, when it fails."""
    with tempfile.TemporaryDirectory() as tmp:
        figures, log = Path(tmp, "figures"), Path(tmp, "out")
        with open(log, "w") as out:
            launch = [sys.executable, "-c", _LAUNCHER, str(figures), *cmd]
            code = subprocess.run(launch, cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
                                  env=env).returncode  # fmt: skip
        text = log.read_text(errors="replace")
        if code != 0:
            raise RuntimeError(f"{' '.join(map(str, cmd[:4]))} failed ({code}): {text[-2000:]}")
        seconds, cpu, peak_kib = figures.read_text().split()
    return {"s": float(seconds), "cpu_s": float(cpu), "peak_mb": int(peak_kib) / 1024, "out": text}


def small_trace(path: Path, kb: float = STARTUP_KB) -> int:
    """A Kineto trace of about `kb` KB: training steps of runtime calls, kernels and copies."""
    events, step = [], 0
    while len(json.dumps(events)) < kb * 1000 - 120:
        t = 1_000.0 + step * 500
        events += [
            {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": 1,
             "tid": 1, "ts": t, "dur": 450.0},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
             "ts": t + 10, "dur": 5.0, "args": {"correlation": 2 * step}},
            {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": t + 20,
             "dur": 300.0, "args": {"correlation": 2 * step, "device": 0}},
            {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoH (Device -> Pinned)", "pid": 0,
             "tid": 7, "ts": t + 330, "dur": 20.0, "args": {"bytes": 4096, "device": 0}},
        ]  # fmt: skip
        step += 1
    trace = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "generated"}],
             "traceEvents": events}  # fmt: skip
    path.write_text(json.dumps(trace))
    return path.stat().st_size


def startup(workdir: Path, runs: int = RUNS) -> dict:
    """The CLI on a small trace as a user runs it, `runs` times beside a bare interpreter (one
    run first, not counted, caches its bytecode)."""
    path = workdir / "small.pt.trace.json"
    size = small_trace(path)
    ours, bare = [], []
    try:
        with tempfile.TemporaryDirectory(dir=workdir) as cache:
            env = cached_bytecode(Path(cache))
            command([*OURS, str(path)], env)
            for _ in range(runs):
                ours.append(command([*OURS, str(path)], env))
                bare.append(command([sys.executable, "-c", "pass"]))
    finally:
        path.unlink(missing_ok=True)
    times = [r["s"] for r in ours]
    return {"kb": size / 1000, "runs": runs, "s": statistics.median(times), "lo": min(times),
            "hi": max(times), "cpu_s": statistics.median([r["cpu_s"] for r in ours]),
            "peak_mb": max(r["peak_mb"] for r in ours),
            "bare_s": statistics.median([r["s"] for r in bare])}  # fmt: skip


def startup_lines(run: dict) -> list[str]:
    """The start-up figures and their verdict."""
    ok = run["s"] <= STARTUP_LIMIT_S
    return [
        f"start-up, `python -m analysis.profiles.cli summary` on a {run['kb']:.1f} KB Kineto trace"
        f" (a process from start to exit, bytecode cached), {run['runs']} runs: median"
        f" {run['s']:.3f} s ({run['lo']:.3f}-{run['hi']:.3f}; CPU {run['cpu_s']:.3f} s), peak"
        f" {run['peak_mb']:.0f} MB; `python -c pass`: median {run['bare_s']:.3f} s",
        f"verdict start-up: {'PASS' if ok else 'FAIL'} (median {run['s']:.3f} s, need <="
        f" {STARTUP_LIMIT_S} s)",
    ]


def versus_hta(
    hta_python: str, trace: Path, pairs: int = RUNS, workdir: Path | None = None
) -> list[dict]:
    """`pairs` pairs of whole commands on one trace, ours and HTA's, in alternating order; with
    msgspec installed, ours with json alone too ("ours_json", run beside ours)."""
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        env = cached_bytecode(Path(tmp))
        jobs = {"ours": [*OURS, str(trace)], "hta": [hta_python, "-c", _HTA_CHILD, str(trace)]}
        if importlib.util.find_spec("msgspec") is not None:
            jobs["ours_json"] = [*OURS_JSON, str(trace)]
        for name in jobs:
            if name != "hta":
                command(jobs[name], env)  # caches the bytecode; not counted
        runs = []
        for i in range(pairs):
            order = [*jobs] if i % 2 == 0 else [*reversed(jobs)]
            got = {name: command(jobs[name], None if name == "hta" else env) for name in order}
            inner = json.loads(got["hta"]["out"].strip().splitlines()[-1])
            runs.append({**got, "hta": {**got["hta"], **inner}})
    return runs


def hta_lines(runs: Sequence[dict], trace: Path) -> list[str]:
    """The figures of `versus_hta` and the verdict, on the medians of the pairs' ratios."""
    with gzip.open(trace) if trace.suffix == ".gz" else open(trace, "rb") as fh:
        data = sum(len(b) for b in iter(lambda: fh.read(1 << 20), b""))
    mine, hta = [r["ours"] for r in runs], [r["hta"] for r in runs]
    time_ratio = statistics.median([o["s"] / h["s"] for o, h in zip(mine, hta, strict=True)])
    cpu_ratio = statistics.median([o["cpu_s"] / h["cpu_s"] for o, h in zip(mine, hta, strict=True)])
    peak_ratio = statistics.median(
        [o["peak_mb"] / h["peak_mb"] for o, h in zip(mine, hta, strict=True)]
    )

    def mid(rows: Sequence[dict], key: str) -> float:
        return statistics.median([r[key] for r in rows])

    def verdict(ratio: float, need: float) -> str:
        return f"{'PASS' if ratio <= need else 'FAIL'} ({ratio:.3f}, need <= {need:.3f})"

    return [
        f"HTA {hta[0]['version']} vs ours on HTA's own trace {trace.name} ({data / 1e6:.1f} MB of"
        f" JSON, {trace.stat().st_size / 1e6:.1f} MB on disk), {len(runs)} pairs of whole"
        " commands, alternating which runs first:",
        f"  ours (summary: metrics and time breakdown; events decoded by {kineto_fast.name()}):"
        f" median {mid(mine, 's'):.2f} s (CPU"
        f" {mid(mine, 'cpu_s'):.2f} s), peak {mid(mine, 'peak_mb'):.0f} MB",
        f"  HTA (TraceAnalysis + get_temporal_breakdown): median {mid(hta, 's'):.2f} s (CPU"
        f" {mid(hta, 'cpu_s'):.2f} s; import {mid(hta, 'import_s'):.2f}, parse"
        f" {mid(hta, 'parse_s'):.2f}, breakdown {mid(hta, 'breakdown_s'):.2f}), peak"
        f" {mid(hta, 'peak_mb'):.0f} MB",
        f"verdict vs HTA (ours/HTA, median of the pairs): time {verdict(time_ratio, HTA_TIME_RATIO)};"
        f" memory {verdict(peak_ratio, HTA_MEMORY_RATIO)}; CPU time {cpu_ratio:.3f}",
        *_json_only_lines(runs),
    ]


def _json_only_lines(runs: Sequence[dict]) -> list[str]:
    """Ours with json alone beside HTA (information: the verdict judges the decoder named)."""
    if "ours_json" not in runs[0]:
        return []
    ratio = {k: statistics.median([r["ours_json"][k] / r["hta"][k] for r in runs])
             for k in ("s", "cpu_s", "peak_mb")}  # fmt: skip
    mid = {
        k: statistics.median([r["ours_json"][k] for r in runs]) for k in ("s", "cpu_s", "peak_mb")
    }
    return [
        f"  ours with json alone (msgspec hidden): median {mid['s']:.2f} s (CPU"
        f" {mid['cpu_s']:.2f} s), peak {mid['peak_mb']:.0f} MB; ours/HTA: time {ratio['s']:.3f}"
        f" ({'within' if ratio['s'] <= HTA_TIME_RATIO else 'not within'} 1/7), CPU"
        f" {ratio['cpu_s']:.3f}, memory {ratio['peak_mb']:.3f}"
    ]


def find_hta(given: str | None) -> tuple[str | None, str]:
    """(python that imports hta, "") or (None, the line saying why HTA is left out)."""
    python = given or settings.value(HTA_ENV)
    how = (
        f"set {HTA_ENV}=/path/to/venv/bin/python or pass --hta-python, naming a separate venv "
        "with `pip install HolisticTraceAnalysis`"
    )
    if not python:
        return None, f"HTA: not found ({how})"
    try:
        proc = subprocess.run([python, "-c", "import hta"], capture_output=True, text=True, check=False)  # fmt: skip
    except OSError as exc:
        return None, f"HTA: cannot run {python} ({exc.strerror or exc}); {how}"
    if proc.returncode != 0:
        why = (proc.stderr.strip().splitlines() or ["import failed"])[-1]
        return None, f"HTA: {python} cannot import hta ({why}); {how}"
    return python, ""


def find_hta_trace(given: Path | None) -> tuple[Path | None, str]:
    """(HTA's trace, "") or (None, the line saying where to get it)."""
    path = given or settings.value(HTA_TRACE_ENV)
    repo, commit, where = HTA_TRACE_SOURCE
    how = (
        f"set {HTA_TRACE_ENV}=/path/to/{Path(where).name} or pass --hta-trace: HTA's own trace,"
        f" https://github.com/{repo}/raw/{commit}/{where}"
    )
    if path is None:
        return None, f"HTA: no trace to compare on ({how})"
    if not path.is_file():
        return None, f"HTA: {path} is not a file ({how})"
    return path, ""
