"""Benchmark: overhead of each available profiler on the vision training loop.

    python -m run.bench.profiler [--size 32] [--batch-size 16] [--steps 12] [--repeats 3]

bench-vision's synthetic loop (MobileNetV2, fp32, tensors on the device, one process), so only
the profiler differs; variants interleaved `--repeats` times, median step time against `none`:

    none    no profiler (run/node/profilers.py's no-op twin)
    torch   torch.profiler (CPU, plus CUDA on a GPU) over every timed step; the trace export
            is timed apart (`export s`)
    nsys    the loop in a child process under `nsys profile`, against the same child without;
            only where nsys is on the PATH

Overhead % = (profiled step time / unprofiled step time - 1) x 100. Warm-up steps are excluded.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from run.bench.vision import WARMUP, model_and_batch
from run.node import profilers, profiling
from run.program import program
from run.vision.loop import precision_setup, train_step


def step_times(kind: str, size: int, batch: int, steps: int, workdir: Path) -> tuple[float, float]:
    """(median seconds per timed step, trace export seconds) of one variant in this process."""
    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    model, opt, x, y = model_and_batch(device, batch, size)
    fp32 = precision_setup("fp32", device)
    window = {"wait_steps": WARMUP, "warmup_steps": 0, "active_steps": steps, "max_seconds": 0}
    if kind == "torch":
        prof = profilers.TorchProfiler(window, workdir / "bench.pt.trace.json.gz", cuda)
    elif kind == "nsys":
        prof = profilers.NsysProfiler(window)
    else:
        prof = profilers.NoProfiler()
    times = []
    with prof:
        for i in range(WARMUP + steps):
            if cuda:
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            train_step(model, opt, fp32, x, y)
            if cuda:
                torch.cuda.synchronize()
            if i >= WARMUP:
                times.append(time.perf_counter() - t0)
            if i < WARMUP + steps - 1:
                prof.step()  # the last step's trace export happens on leaving, timed below
        t_exit = time.perf_counter()
    export_s = time.perf_counter() - t_exit
    return statistics.median(times), export_s


def child(kind: str, args: argparse.Namespace, nsys: bool) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "run.bench.profiler", "--child", kind, "--size",
               str(args.size), "--batch-size", str(args.batch_size), "--steps", str(args.steps)]  # fmt: skip
        if nsys:
            window = {**profiling.DEFAULT_WINDOW}
            cmd = profiling.nsys_command([], cmd, Path(tmp), window, capture_api=True)
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        return json.loads(out.strip().splitlines()[-1])["step_s"]


@program()
def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument(
        "--size", type=int, default=None, help="image size; default 32 (CPU), 224 (GPU)"
    )
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--child", choices=["none", "nsys"], help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    cuda = torch.cuda.is_available()
    args.size = args.size or (224 if cuda else 32)
    if args.child:
        with tempfile.TemporaryDirectory() as tmp:
            kind = args.child if cuda else "none"
            step_s, _ = step_times(kind, args.size, args.batch_size, args.steps, Path(tmp))
        print(json.dumps({"step_s": step_s}))
        return 0

    device = torch.cuda.get_device_name() if cuda else f"cpu ({torch.get_num_threads()} threads)"
    print(f"bench-profiler: MobileNetV2 fp32 {args.size}px batch {args.batch_size} on {device}; "
          f"{args.steps} timed steps after {WARMUP} warm-up, {args.repeats} interleaved repeats")  # fmt: skip
    results: dict[str, list[float]] = {"none": [], "torch": []}
    exports: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.repeats):
            for kind in results:
                step_s, export_s = step_times(
                    kind, args.size, args.batch_size, args.steps, Path(tmp)
                )
                results[kind].append(step_s)
                if kind == "torch":
                    exports.append(export_s)
    base = statistics.median(results["none"])
    print(f"{'profiler':<10} {'median step s':>14} {'overhead %':>11} {'export s':>9}")
    print(f"{'none':<10} {base:>14.4f} {'0.0':>11} {'-':>9}")
    prof = statistics.median(results["torch"])
    over = 100.0 * (prof / base - 1.0)
    print(f"{'torch':<10} {prof:>14.4f} {over:>11.1f} {statistics.median(exports):>9.2f}")
    if shutil.which("nsys") and cuda:
        plain = statistics.median(child("none", args, nsys=False) for _ in range(args.repeats))
        under = statistics.median(child("nsys", args, nsys=True) for _ in range(args.repeats))
        print(f"{'nsys':<10} {under:>14.4f} {100.0 * (under / plain - 1.0):>11.1f} {'-':>9}")
    else:
        why = "not on the PATH" if not shutil.which("nsys") else "needs CUDA"
        print(f"{'nsys':<10} {'-':>14} {'-':>11} {'-':>9}  not measured: nsys {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
