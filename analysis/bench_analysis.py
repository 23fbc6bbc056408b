"""Benchmark the profile readers: large synthetic profiles, a small one end to end, and HTA.

    python -m analysis.bench_analysis [--sizes 50 500] [--kinds nsys kineto kineto.gz]
                                      [--workdir DIR] [--hta-python PATH] [--hta-trace PATH]
                                      [--pairs 5]

Per size and kind it writes one synthetic profile (analysis/profiles/synth.py), reads it in a
fresh child process, checks the parsed totals against what was generated, deletes the file and
prints one line: MB/s and memory of the metrics reader alone ("read"), and of what the CLI does
with a file ("cli": the metrics and the time breakdown from one reading of the file).
Then one verdict line per kind, on the reader and on the CLI alike:
    speed  MB/s at every size >= THRESHOLD_MB_S (nsys 200, Kineto plain and gzip 100)
    flat   peak RSS at the largest size <= FLAT_RATIO (1.25) x peak RSS at the smallest
Sizes and MB/s count the bytes nsys or Kineto write; for kineto.gz, the JSON inside the gzip
(level 6, as gzip's default), so plain and gzip figures compare the same trace.
Memory: "base" is the child's RSS once the readers are imported (as in the CLI: no pandas);
the child then resets the kernel's high-water mark (/proc/self/clear_refs), so "peak" is the
highest RSS while reading and peak - base what the reading itself added. Where the reset is
refused, peak is ru_maxrss, which also covers the imports.
Then the reader as a user runs it (analysis/bench_hta.py): a whole command on a small trace
(start-up, verdict <= 0.3 s), and, with --hta-python (or HTA_PYTHON) naming the python of a
separate venv where `import hta` works and --hta-trace (or HTA_TRACE) naming HTA's own 54 MB test
trace, `--pairs` pairs of whole commands beside HTA (verdict: time <= 1/7, peak RSS <= 1/5).
Every figure is taken on a machine others may share: the load average is printed beside them.
Exit status: 0 when every parse matches the generator, 1 otherwise (verdicts do not change it).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from analysis import bench_hta as hta
from analysis.profiles import kineto_fast
from run.program import program

KINDS = ("nsys", "kineto", "kineto.gz")
THRESHOLD_MB_S = {"nsys": 200.0, "kineto": 100.0, "kineto.gz": 100.0}
FLAT_RATIO = 1.25
DEFAULT_SIZES = (50.0, 500.0)


def _status_kib(field: str) -> int:
    with open("/proc/self/status", encoding="ascii") as fh:
        return int(re.search(rf"^{field}:\s+(\d+)", fh.read(), re.M).group(1))


def _reset_peak() -> bool:
    """Reset this process's RSS high-water mark; False where the kernel refuses."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def _measure(fn, *args) -> tuple[object, float, int, int]:
    """(result, seconds, RSS before in KiB, peak RSS during in KiB) of one call."""
    base = _status_kib("VmRSS")
    exact = _reset_peak()
    start = time.perf_counter()
    result = fn(*args)
    seconds = time.perf_counter() - start
    peak = _status_kib("VmHWM") if exact else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return result, seconds, base, peak


def _child(kind: str, path: str) -> None:
    """Read one file as the CLI does and print the timings as JSON (runs in its own process)."""
    from analysis.profiles import read_profile_breakdown
    from analysis.profiles.nsys_sqlite import read_nsys_sqlite
    from analysis.profiles.torch_trace import read_torch_trace

    reader = read_nsys_sqlite if kind == "nsys" else read_torch_trace
    prof, read_s, base, peak = _measure(reader, path)
    # The CLI's reading: metrics and breakdown from one pass over the file.
    (both, split), cli_s, _, cli_peak = _measure(read_profile_breakdown, path)
    rows = {r.raw_name: [r.calls, r.total_s, r.bytes] for r in prof.rows}
    if {r.raw_name: [r.calls, r.total_s, r.bytes] for r in both.rows} != rows or not split.devices:
        raise RuntimeError("the one-pass reading disagrees with the reader")
    print(json.dumps({"read_s": read_s, "cli_s": cli_s, "base_kib": base, "peak_kib": peak,
                      "cli_peak_kib": cli_peak, "rows": rows}))  # fmt: skip


def _check(kind: str, expected: dict, rows: dict) -> str:
    """Compare parsed call counts and times with the generator's; '' when all match."""
    from analysis.profiles.synth import MEMCPY_OPER

    kind_of = {label: i for i, _, long, short in MEMCPY_OPER for label in (long, short)}
    problems = []
    for raw, (calls, total_s, _) in rows.items():
        key = raw
        if kind == "nsys" and raw.startswith("CUDA memcpy "):
            key = f"memcpy:{kind_of[raw.removeprefix('CUDA memcpy ')]}"
        want_calls, want_total, _ = expected[key]
        want_s = want_total * (1e-9 if kind == "nsys" else 1e-6)
        if calls != want_calls or abs(total_s - want_s) > 1e-6 * max(want_s, 1):
            problems.append(f"{raw}: got {calls}/{total_s:.6f}s want {want_calls}/{want_s:.6f}s")
    return "; ".join(problems)


def _read_one(kind: str, path: Path, data_bytes: int, expected: dict) -> dict:
    """Read one generated file in a child process; the result line's figures."""
    # Written back first: the kernel flushing the fresh file would take CPU from the reading,
    # and a profile is read long after it was written.
    with open(path, "rb") as fh:
        os.fsync(fh.fileno())
    cmd = [sys.executable, "-m", "analysis.bench_analysis", "--child", kind, str(path)]
    proc = subprocess.run(cmd, cwd=hta.REPO, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{kind} read failed: {proc.stderr.strip()[-2000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    mb = data_bytes / 1e6
    return {"kind": kind, "size_mb": mb, "disk_mb": path.stat().st_size / 1e6,
            "read_s": out["read_s"], "read_mb_s": mb / out["read_s"], "cli_s": out["cli_s"],
            "cli_mb_s": mb / out["cli_s"], "base_mb": out["base_kib"] / 1024,
            "peak_mb": out["peak_kib"] / 1024, "cli_peak_mb": out["cli_peak_kib"] / 1024,
            "check": _check(kind, expected, out["rows"]) or "ok"}  # fmt: skip


def bench(sizes: Sequence[float], workdir: Path, kinds: Sequence[str]) -> list[dict]:
    """Generate, read and check each (size, kind); one result per pair."""
    from analysis.profiles.synth import write_nsys_sqlite, write_torch_trace

    results: list[dict] = []
    plain, sqlite = workdir / "bench.pt.trace.json", workdir / "bench.sqlite"
    packed = workdir / "bench.pt.trace.json.gz"
    try:
        for size_mb in sizes:
            if "nsys" in kinds:
                expected = write_nsys_sqlite(sqlite, size_mb)
                results.append(_read_one("nsys", sqlite, sqlite.stat().st_size, expected))
                sqlite.unlink()
            if "kineto" not in kinds and "kineto.gz" not in kinds:
                continue
            # One trace serves both Kineto kinds, so plain and gzip read the same events.
            expected = write_torch_trace(plain, size_mb)
            data = plain.stat().st_size
            if "kineto" in kinds:
                results.append(_read_one("kineto", plain, data, expected))
            if "kineto.gz" in kinds:
                with open(plain, "rb") as fin, gzip.open(packed, "wb", compresslevel=6) as fout:
                    shutil.copyfileobj(fin, fout, 1 << 20)
                results.append(_read_one("kineto.gz", packed, data, expected))
                packed.unlink()
            plain.unlink()
    finally:
        for path in (plain, sqlite, packed):
            path.unlink(missing_ok=True)
    return results


def verdicts(results: Sequence[dict]) -> list[str]:
    """One line per kind, judging the reader and then the CLI (metrics and breakdown in one pass)
    the same way: MB/s against THRESHOLD_MB_S at every size, and whether peak RSS stays flat
    (largest size <= FLAT_RATIO x smallest; n/a with one size)."""
    lines = []
    for kind in dict.fromkeys(r["kind"] for r in results):
        mine = sorted((r for r in results if r["kind"] == kind), key=lambda r: r["size_mb"])
        reader = _judge(mine, THRESHOLD_MB_S[kind], "read_mb_s", "peak_mb")
        cli = _judge(mine, THRESHOLD_MB_S[kind], "cli_mb_s", "cli_peak_mb")
        lines.append(f"verdict {kind}: {reader}; cli (metrics + breakdown, one pass): {cli}")
    return lines


def _judge(mine: Sequence[dict], need: float, speed_key: str, peak_key: str) -> str:
    slowest = min(r[speed_key] for r in mine)
    speed = f"speed {'PASS' if slowest >= need else 'FAIL'} (slowest {slowest:.0f} MB/s, need >= {need:.0f})"  # fmt: skip
    lo, hi = mine[0], mine[-1]
    if len(mine) < 2:
        return f"{speed}; memory n/a (one size)"
    ratio = hi[peak_key] / lo[peak_key]
    return (
        f"{speed}; memory {'flat' if ratio <= FLAT_RATIO else 'NOT flat'} (peak {lo[peak_key]:.0f}"
        f" MB at {lo['size_mb']:.0f} MB -> {hi[peak_key]:.0f} MB at {hi['size_mb']:.0f}"
        f" MB: x{ratio:.2f}, flat when <= x{FLAT_RATIO})"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m analysis.bench_analysis", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("--sizes", type=float, nargs="+", default=list(DEFAULT_SIZES),
                        metavar="MB", help="profile sizes in MB (default: 50 500)")  # fmt: skip
    parser.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS))
    parser.add_argument("--workdir", type=Path, help="where to write (default: a temp folder)")
    parser.add_argument("--hta-python", help=f"python of a venv with HTA (default: ${hta.HTA_ENV})")
    parser.add_argument("--hta-trace", type=Path,
                        help=f"HTA's own test trace (default: ${hta.HTA_TRACE_ENV})")  # fmt: skip
    parser.add_argument("--pairs", type=int, default=hta.RUNS,
                        help=f"runs of the start-up and pairs beside HTA (default {hta.RUNS})")  # fmt: skip
    parser.add_argument("--child", nargs=2, metavar=("KIND", "PATH"), help=argparse.SUPPRESS)
    return parser


def _load() -> str:
    return f"{os.getloadavg()[0]:.1f}"


@program()
def main(argv: list[str]) -> int:
    """Entry point; returns the exit status (1 if a parse disagrees with the generator)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if any(s <= 0 for s in args.sizes):
        parser.error("--sizes must be positive")
    if args.pairs < 1:
        parser.error("--pairs must be >= 1")
    if args.child:
        _child(*args.child)
        return 0
    hta_python, hta_note = hta.find_hta(args.hta_python)
    trace, trace_note = hta.find_hta_trace(args.hta_trace) if hta_python else (None, "")
    load = _load()
    own_dir = args.workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="bench_analysis.")) if own_dir else args.workdir
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        results = bench(args.sizes, workdir, args.kinds)
        small = hta.startup(workdir, args.pairs)
        beside = hta.versus_hta(hta_python, trace, args.pairs, workdir) if trace else []
    finally:
        if own_dir:
            shutil.rmtree(workdir, ignore_errors=True)
    print(f"{'kind':<9} {'MB':>7} {'disk MB':>8} {'read MB/s':>9} {'cli MB/s':>8} "
          f"{'base MB':>7} {'peak MB':>7} {'+read':>6} {'cli peak':>8}  check")  # fmt: skip
    for r in results:
        print(
            f"{r['kind']:<9} {r['size_mb']:7.1f} {r['disk_mb']:8.1f} {r['read_mb_s']:9.1f} "
            f"{r['cli_mb_s']:8.1f} {r['base_mb']:7.1f} {r['peak_mb']:7.1f} "
            f"{r['peak_mb'] - r['base_mb']:6.1f} {r['cli_peak_mb']:8.1f}  {r['check']}"
        )
    print("\n".join(verdicts(results)))
    if any(r["kind"].startswith("kineto") for r in results):
        print(f"Kineto events decoded by {kineto_fast.name()}")
    print("\n".join(hta.startup_lines(small)))
    print("\n".join(hta.hta_lines(beside, trace)) if beside else hta_note or trace_note)
    print(f"load average (1 min): {load} at the start, {_load()} at the end, on"
          f" {os.cpu_count()} CPUs")  # fmt: skip
    return 0 if all(r["check"] == "ok" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
