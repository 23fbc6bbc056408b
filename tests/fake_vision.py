"""A stand-in for run.vision with the same command line, for testing the sweep's machinery fast.

FAKE_MODE picks what it does: ok | fail:<precision> | oom:<precision> | hang:<precision> |
slow:<precision> (prints a line, then takes 1.5 s).
Times follow a simple model (fp64 2x, fp16 0.5x fp32; each GPU 0.9 of ideal; issue 20's
optimisations: upsample=device 0.6x, fused_optimizer 0.9x, compile 0.8x plus compile_s 5 s,
host_sync=epoch 0.95x) so that analysis tests know which verdicts to expect. Every launch is appended to FAKE_LAUNCHES.
"""

import argparse
import json
import os
import time
from pathlib import Path

ap = argparse.ArgumentParser()
ap.add_argument("--spec", type=Path)
ap.add_argument("--run-dir", type=Path)
args = ap.parse_args()
spec = json.loads(args.spec.read_text())
name = args.run_dir.name.split("@")[0]  # the staging folder is <run>@<attempt>
with open(os.environ["FAKE_LAUNCHES"], "a") as fh:
    fh.write(name + "\n")
mode, _, which = os.environ.get("FAKE_MODE", "ok").partition(":")
if which and spec["precision"] == which:
    if mode == "fail":
        raise ValueError("synthetic failure for the test")
    if mode == "oom":
        raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
    if mode == "hang":
        time.sleep(60)
    if mode == "slow":
        print("[fake] working on it", flush=True)
        time.sleep(1.5)
factor = {"fp64": 2.0, "fp32": 1.0, "fp16": 0.5, "bf16": 0.5}[spec["precision"]]
speed = 1 + 0.9 * (spec["gpus"] - 1) if spec["strategy"] == "ddp_ds" else 1.0
pin = 0.8 if spec["pin_memory"] else 1.0
opt = 1.0
for key, value, gain in (("upsample", "device", 0.6), ("fused_optimizer", True, 0.9),
                         ("compile", True, 0.8), ("host_sync", "epoch", 0.95)):  # fmt: skip
    opt *= gain if spec.get(key) == value else 1.0
total = 100.0 * factor * pin * opt * (spec["image_size"] / 32) ** 2 / speed
nbytes = {"fp64": 8, "fp32": 4, "fp16": 2, "bf16": 2}[spec["precision"]]
input_bytes = 784 if spec.get("upsample") == "device" else nbytes * 3 * spec["image_size"] ** 2
for e in range(spec["epochs"]):
    row = {
        "epoch": e + 1,
        "train_time_s": total / spec["epochs"],
        "eval_time_s": 0.1,
        "images": 64,
        "images_per_s": 1.0,
        "train_loss": 2.0 / (e + 1) * (1.1 if factor == 2 else 1),
        "test_accuracy_pct": 98.5,
    }
    with open(args.run_dir / "epochs.jsonl", "a") as fh:
        fh.write(json.dumps(row) + "\n")
summary = {
    "name": name,
    "status": "ok",
    "error": None,
    "total_time_s": total,
    "final_test_accuracy_pct": 98.5,
    "precision_effective": spec["precision"],
    "peak_memory_bytes": 1,
    "memory_kind": "gpu_max_allocated",
    "device": os.environ.get("FAKE_DEVICE", "cpu"),
    "images_per_s": 64 * spec["epochs"] / total,
    "compile_s": 5.0 if spec.get("compile") else None,
    "input_bytes_per_image": input_bytes,
    "htod_bytes_per_image": None if os.environ.get("FAKE_DEVICE", "cpu") == "cpu" else input_bytes,
}
(args.run_dir / "summary.json").write_text(json.dumps(summary))
