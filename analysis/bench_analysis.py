"""Benchmark the profile readers on large synthetic profiles: parse throughput and peak memory.

    python -m analysis.bench_analysis [--size-mb 1024] [--workdir DIR] [--kinds nsys torch]

Writes one synthetic nsys SQLite export and one torch Chrome trace of at least --size-mb MB each,
parses each in a fresh child process (so ru_maxrss is that parse's own peak, not the generator's),
checks the parsed totals against what was generated, prints MB/s and peak RSS, and deletes the
files it made.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from run import settings

REPO = Path(__file__).resolve().parents[1]


def _child(kind: str, path: str) -> None:
    """Parse one file and print timings as JSON (runs in its own process)."""
    from analysis.profiles import read_nsys_sqlite, read_torch_trace

    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    prof = read_nsys_sqlite(path) if kind == "nsys" else read_torch_trace(path)
    parse_s = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    rows = {r.raw_name: [r.calls, r.total_s, r.bytes] for r in prof.rows}
    print(json.dumps({"parse_s": parse_s, "rss_before_kib": rss_before, "peak_kib": peak,
                      "wall_s": prof.wall_s, "rows": rows}))  # fmt: skip


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


def bench(size_mb: float, workdir: Path, kinds: Sequence[str]) -> list[dict]:
    """Generate, parse and check each kind; returns one result dict per kind."""
    from analysis.profiles.synth import write_nsys_sqlite, write_torch_trace

    results = []
    for kind in kinds:
        path = workdir / ("bench.sqlite" if kind == "nsys" else "bench.pt.trace.json")
        try:
            start = time.perf_counter()
            if kind == "nsys":
                expected = write_nsys_sqlite(path, size_mb)
            else:
                expected = write_torch_trace(path, size_mb)
            gen_s = time.perf_counter() - start
            size = path.stat().st_size
            proc = subprocess.run(
                [sys.executable, "-m", "analysis.bench_analysis", "--child", kind, str(path)],
                cwd=REPO,
                capture_output=True,
                text=True,
                check=False,
            )
            if proc.returncode != 0:
                raise RuntimeError(f"{kind} parse failed: {proc.stderr.strip()[-2000:]}")
            out = json.loads(proc.stdout.strip().splitlines()[-1])
        finally:
            path.unlink(missing_ok=True)
        results.append(
            {
                "kind": kind,
                "size_mb": size / 1e6,
                "gen_s": gen_s,
                "parse_s": out["parse_s"],
                "mb_per_s": size / 1e6 / out["parse_s"],
                "base_rss_mb": out["rss_before_kib"] / 1024,
                "peak_rss_mb": out["peak_kib"] / 1024,
                "check": _check(kind, expected, out["rows"]) or "ok",
            }
        )
    return results


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (1 if a parse disagrees with the generator)."""
    parser = argparse.ArgumentParser(prog="python -m analysis.bench_analysis", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("--size-mb", type=float, default=1024, help="size of each file (MB)")
    parser.add_argument("--workdir", type=Path, help="where to write (default: a temp folder)")
    parser.add_argument("--kinds", nargs="+", choices=["nsys", "torch"], default=["nsys", "torch"])
    parser.add_argument("--child", nargs=2, metavar=("KIND", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        settings.check_all()
    except settings.SettingError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.child:
        _child(*args.child)
        return 0

    own_dir = args.workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="bench_analysis.")) if own_dir else args.workdir
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        results = bench(args.size_mb, workdir, args.kinds)
    finally:
        if own_dir:
            shutil.rmtree(workdir, ignore_errors=True)
    print(f"{'kind':<6} {'file MB':>9} {'gen s':>7} {'parse s':>8} {'MB/s':>7} "
          f"{'base RSS MB':>11} {'peak RSS MB':>11}  check")  # fmt: skip
    for r in results:
        print(
            f"{r['kind']:<6} {r['size_mb']:9.1f} {r['gen_s']:7.1f} {r['parse_s']:8.2f} "
            f"{r['mb_per_s']:7.1f} {r['base_rss_mb']:11.1f} {r['peak_rss_mb']:11.1f}  {r['check']}"
        )
    return 0 if all(r["check"] == "ok" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
