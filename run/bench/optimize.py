"""Benchmark: the faithful against the optimised step of the O1 and O3 ladders, on this machine.

    python -m run.bench.optimize [--steps 10] [--repeats 2] [--llm-steps 8] [--skip-llm]

Vision: O1's first step (host-side upsampling, fp32, eager) against its last (every optimisation),
the matrix's smoke cells on one device with the run's own pieces (run/vision/inputs.py and
loop.py). On a GPU 500 px at full width (where the paper saw the copies dominate), else the smoke
size. Images/s over --steps steps after bench-vision's warm-up (which takes torch.compile's
compilation), the sides alternating --repeats times, best of each. Bytes per image: of the input
batch as handed to the copy (host-to-device on a GPU; a CPU has no device copy).

LLM: O3's first step (the paper's LoRA) against its last (packed, compiled; AdamW fused in both),
the smoke cells (the tiny llama3) each a real run of run/llm/tune.py in a temporary folder,
alternating; tokens/s is the recipe's own rate after its warm-up (run/llm/metrics.py), without
compilation; the launch's wall time is printed beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from run import store
from run.bench.loaders import endless
from run.bench.vision import WARMUP, timed_loop
from run.llm import spec as llm_spec
from run.program import program
from run.sweep import matrix as mx
from run.vision import launch as vision_launch
from run.vision import spec as vision_spec
from run.vision.inputs import data_sets
from run.vision.loop import model_for, optimizer_for, precision_setup

SCALE = "smoke"  # its O1/O3 cells are sized for one device and need no download
GPU_IMAGE_SIZE = 500


def ends(exp: str, **want: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    specs = [
        s
        for s in mx.expand(exp, SCALE, n_repeats=1).specs
        if s["gpus"] == 1 and all(s[k] == v for k, v in want.items())
    ]
    steps = {mx.ladder_step(exp, s)[0]: s for s in specs}
    return steps[min(steps)], steps[max(steps)]


def vision_side(spec: dict[str, Any], device: torch.device) -> dict[str, Any]:
    prec = precision_setup(spec["precision"], device)
    train, _ = data_sets(spec, prec.input_dtype)
    workers = spec["num_workers"]
    loader = torch.utils.data.DataLoader(
        train, batch_size=spec["batch_size"], shuffle=True, drop_last=True,
        pin_memory=spec["pin_memory"] and device.type == "cuda",
        num_workers=workers, persistent_workers=workers > 0,
    )  # fmt: skip
    assert len(loader) >= 1, f"{spec['train_images']} images make no batch of {spec['batch_size']}"
    torch.manual_seed(spec["seed"])
    model = model_for(spec, device, prec)
    opt = optimizer_for(model.parameters(), spec)
    step_model = torch.compile(model) if spec["compile"] else model
    x0, _ = next(iter(loader))
    batches = endless(lambda: iter(loader))
    loop = {"model": step_model, "opt": opt, "batches": batches, "prec": prec, "spec": spec}
    return {"loop": loop, "bytes_per_image": x0.nbytes / len(x0)}


def llm_rate(spec: dict[str, Any], workdir: Path) -> tuple[float, float]:
    """(tokens/s, launch wall seconds) of one real run of `spec` (run/llm/tune.py)."""
    run_dir = Path(tempfile.mkdtemp(dir=workdir))
    store.write_json_atomic(run_dir / store.SPEC, spec)
    t0 = time.perf_counter()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(store.REPO), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run([sys.executable, "-m", "run.llm.tune", "--run-dir", str(run_dir)],
                          capture_output=True, text=True, cwd=store.REPO, env=env)  # fmt: skip
    wall = time.perf_counter() - t0
    summary = run_dir / store.SUMMARY
    result = json.loads(summary.read_text()) if summary.is_file() else {}
    if done.returncode != 0 or result.get("status") != "ok":
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"{mx.run_name(spec)}: {result.get('error') or tail[0]}")
    return float(result["tokens_per_s"]), wall


@program()
def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--steps", type=int, default=10, help="timed vision steps per repeat")
    ap.add_argument("--repeats", type=int, default=2, help="alternating repeats; best one kept")
    ap.add_argument(
        "--size", type=int, help=f"vision px (default: smoke's on CPU, {GPU_IMAGE_SIZE} on a GPU)"
    )
    ap.add_argument("--llm-steps", type=int, default=8, help="optimizer steps per LLM run")
    ap.add_argument("--skip-llm", action="store_true")
    args = ap.parse_args(argv)
    if min(args.steps, args.repeats, args.llm_steps) < 1:
        print("error: --steps, --repeats and --llm-steps must be at least 1", file=sys.stderr)
        return 2

    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    faithful, optimised = ends("O1")
    size = args.size or (GPU_IMAGE_SIZE if cuda else faithful["image_size"])
    width = 1.0 if cuda and not args.size else faithful["width_mult"]
    # enough images for the warm-up and timed steps, drawn again as often as needed
    n = max(faithful["train_images"], faithful["batch_size"] * (WARMUP + args.steps))
    over = {"image_size": size, "width_mult": width, "train_images": n, "dataset": "digits"}
    if cuda:
        # the paper's DataLoader workers: with smoke's 0 the faithful side would resize 500 px
        # images in the main process, and the ratio would flatter the optimised side
        over["num_workers"] = mx.expand("O1", "paper", n_repeats=1).specs[0]["num_workers"]
    sides = {"faithful": {**faithful, **over}, "optimised": {**optimised, **over}}
    reasons = {k: vision_spec.unsupported_reason(s) for k, s in sides.items()}
    vision_launch.preflight(list(sides.values()))
    print(f"bench-optimize on {device} ({torch.get_num_threads()} CPU threads): vision "
          f"MobileNetV2 x{width:g} at {size}px, batch {faithful['batch_size']}, {args.steps} "
          f"timed steps after {WARMUP} warm-up; best of {args.repeats} alternating repeats")  # fmt: skip
    for k, s in sides.items():
        print(f"  {k:<9} O1 step {mx.ladder_step('O1', s)[1]!r}: {mx.run_name(s)}")
    built = {k: vision_side(s, device) for k, s in sides.items() if not reasons[k]}
    rate = dict.fromkeys(sides, 0.0)
    for _ in range(args.repeats):  # alternating: a burst of load elsewhere slows one repeat
        for k, side in built.items():
            rate[k] = max(rate[k], timed_loop(**side["loop"], device=device, steps=args.steps))
    rows = []
    for k in sides:
        if reasons[k]:
            rows.append(("vision", k, "unsupported", reasons[k]))
            continue
        b = built[k]["bytes_per_image"]
        copy = f"HtoD {b:,.0f} B/image" if cuda else f"no device copy; input {b:,.0f} B/image"
        rows.append(("vision", k, f"{rate[k]:,.1f} images/s", copy))

    if not args.skip_llm:
        lo, hi = ends("O3")
        llm = {"faithful": {**lo, "max_steps": args.llm_steps},
               "optimised": {**hi, "max_steps": args.llm_steps}}  # fmt: skip
        print(f"  LLM (smoke's tiny llama3, {args.llm_steps} steps per run):")
        for k, s in llm.items():
            print(f"  {k:<9} O3 step {mx.ladder_step('O3', s)[1]!r}: {mx.run_name(s)}")
        best = dict.fromkeys(llm, (0.0, 0.0))
        llm_reasons = {k: llm_spec.unsupported_reason(s) for k, s in llm.items()}
        with tempfile.TemporaryDirectory(prefix="bench_optimize.") as tmp:
            try:
                for _ in range(args.repeats):
                    for k, s in llm.items():
                        if llm_reasons[k]:
                            continue
                        tps, wall = llm_rate(s, Path(tmp))
                        best[k] = max(best[k], (tps, -wall))
            except RuntimeError as exc:
                print(f"error: {exc}", file=sys.stderr)
                return 1
        for k, (tps, wall) in best.items():
            if llm_reasons[k]:
                rows.append(("llm", k, "unsupported", llm_reasons[k]))
                continue
            built_in = " (compilation included)" if llm[k]["compile"] else ""
            rows.append(("llm", k, f"{tps:,.0f} tokens/s", f"launch {-wall:.0f} s{built_in}"))

    print(f"\n{'workload':<8} {'side':<10} {'throughput':>20}  bytes / notes")
    for workload, side, value, note in rows:
        print(f"{workload:<8} {side:<10} {value:>20}  {note}")
    for workload in ("vision", "llm"):
        got = [r for r in rows if r[0] == workload and "/s" in r[2]]
        if len(got) == 2:
            a, b = (float(r[2].split()[0].replace(",", "")) for r in got)
            print(f"{workload}: optimised / faithful = {b / a:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
