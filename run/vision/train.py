"""Vision workload: torchvision MobileNetV2 trained on MNIST (Scenario A) under DDP.

The sweep launches every run under torchrun (the command is the first line of its log.txt); the
README ("How a run works") gives the command, the three strategies and why the batch is cast on
the host to the precision's dtype. The loop is run/vision/loop.py, the data run/vision/inputs.py;
the loss is read once per epoch: no per-step host sync beyond what the paper's loop has.

Optimisations (issue 20; each off by default, so the faithful runs keep their loop and names):
  upsample=device   uint8 28x28 batches copied and upsampled on the device: the host-to-device
                    bytes follow the stored image, not the image_size tensor
  fused_optimizer   Adam(fused=True)
  compile           torch.compile of the DDP-wrapped model; compiling steps are timed as
                    compile_s and left out of images_per_s
  host_sync=epoch   copies issued non_blocking even from pageable memory: today's loop waits once
                    per step without pin_memory (O1 sets pin_memory with it)
summary.json also gives input_bytes_per_image and htod_bytes_per_image (CUDA only).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from run import settings, store
from run.errors import UserError
from run.node import lifeline, probe, profilers, provenance, threads
from run.program import program
from run.vision import inputs, launch, loop, scenario_b
from run.vision import spec as vision_spec

T_START = time.monotonic()


def check_inputs(spec_path: Path) -> dict[str, Any]:
    if not spec_path.is_file():
        raise FileNotFoundError(f"no spec file at {spec_path}")
    try:
        spec = store.read_json(spec_path)
    except ValueError as exc:
        raise ValueError(f"spec file {spec_path} is not valid JSON") from exc
    vision_spec.validate(spec)
    probe.check_cuda()  # GPUs that torch cannot use: stop here, never train on the CPU instead
    if spec["loader"] == "dali" and (spec["scenario"] != "B" or spec["strategy"] != "ddp_ds"):
        raise ValueError("loader=dali reads the Scenario B files sharded by rank: it needs "
                         "scenario B and strategy ddp_ds")  # fmt: skip
    world = settings.world_size()
    if spec["gpus"] != world:
        raise ValueError(
            f"the spec asks for {spec['gpus']} rank(s) but {world} were started "
            f"(torchrun --nproc_per_node={spec['gpus']})"
        )
    if torch.cuda.is_available() and spec["gpus"] > torch.cuda.device_count():
        raise ValueError(
            f"the spec asks for {spec['gpus']} GPUs, {torch.cuda.device_count()} are visible"
        )
    launch.preflight([spec])  # the data set: made (digits) or checked (MNIST)
    return spec


@program()
def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m run.vision",
        description=__doc__,
        formatter_class=argparse.RawTextHelpFormatter,
    )
    ap.add_argument("--spec", type=Path, required=True, help="resolved run spec (JSON)")
    ap.add_argument("--run-dir", type=Path, required=True, help="where epochs and summary go")
    args = ap.parse_args(argv)
    # torchrun starts ranks in sessions of their own: end with the launcher (lifeline.py)
    lifeline.tie_to_parent()
    try:  # bad input: no process group, nothing written into the run folder
        spec = check_inputs(args.spec)
    except ValueError as exc:
        raise UserError(str(exc)) from exc
    try:  # made where missing (a kept run's spec run again into a new folder)
        args.run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"--run-dir {args.run_dir}: {exc.strerror or exc}") from exc
    cuda = torch.cuda.is_available()
    local_rank = settings.local_rank()
    if cuda:
        # before anything touches CUDA (unsupported_reason does): else every rank opens a
        # context on GPU 0, memory its peak and NCCL would then share
        torch.cuda.set_device(torch.device("cuda", local_rank))
    reason = vision_spec.unsupported_reason(spec)
    if reason:
        # a result, not an error (as the sweep records it without launching): a run by hand
        if settings.rank() == 0:
            name = vision_spec.run_name(spec)
            store.write_json_atomic(
                args.run_dir / store.SUMMARY,
                {"status": "unsupported", "error": reason, "name": name},
            )
            print(f"[vision] {name}: unsupported: {reason}", flush=True)
        return 0

    # --- set-up: one process per rank, NCCL on GPUs (device bound first), gloo on CPU ------------
    cpu_share: dict[str, int] = {}
    if cuda:
        device = torch.device("cuda", local_rank)
        dist.init_process_group("nccl", device_id=device)
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo")
        # each rank stands in for one GPU: the same one-thread share at every rank count
        cpu_share = threads.apply(torch, loader_workers(spec))
    try:
        return train(spec, args.run_dir, device, cpu_share)
    finally:
        dist.destroy_process_group()


def loader_workers(spec: dict[str, Any]) -> int:
    """The loader workers (or DALI threads) beside a rank's compute thread, in its CPU share."""
    return scenario_b.DALI_CPU_THREADS if spec.get("loader") == "dali" else spec["num_workers"]


def train(
    spec: dict[str, Any],
    run_dir: Path,
    device: torch.device,
    cpu_share: dict[str, int] | None = None,
) -> int:
    rank, world = dist.get_rank(), dist.get_world_size()
    if rank == 0:
        print(
            f"[vision] {vision_spec.run_name(spec)}: world={world} device={device.type}", flush=True
        )
    torch.manual_seed(spec["seed"])
    prec = loop.precision_setup(spec["precision"], device)
    data = inputs.build_loaders(spec, prec.input_dtype, device, rank, world)
    setup = build_model(spec, device, rank, world, prec)
    setup_s = time.monotonic() - T_START

    # --- profiler: a no-op unless the spec asks for one; its window fits this rank's steps -------
    steps = vision_spec.planned_steps(spec, rank)
    prof = profilers.profiler_for(spec, run_dir, rank, steps)

    # --- training loop: rank 0 writes each epoch's row; the timeline is written once, after it ---
    epochs_file = run_dir / store.EPOCHS
    t_loop = time.monotonic()
    totals = loop.train_epochs(setup, data, prof, epochs_file)
    loop_s = time.monotonic() - t_loop - prof.seconds  # without torch.profiler's trace writing
    store.write_text_atomic(store.timeline_file(run_dir, rank),
                            "".join(json.dumps(e) + "\n" for e in totals.timeline))  # fmt: skip

    write_summary(setup, totals, run_dir, setup_s=setup_s, loop_s=loop_s, profiler_s=prof.seconds,
                  cpu_share=cpu_share or {})  # fmt: skip
    return 0


def build_model(
    spec: dict[str, Any], device: torch.device, rank: int, world: int, prec: loop.Precision
) -> loop.Setup:
    model = loop.model_for(spec, device, prec)
    ddp = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
    # Compiled after wrapping, as torch 2.13 intends: dynamo's DDPOptimizer splits the graph at
    # DDP's buckets, so each all-reduce still overlaps the backward. Evaluation runs eager.
    step_model = torch.compile(ddp) if spec["compile"] else ddp
    opt = loop.optimizer_for(ddp.parameters(), spec)
    return loop.Setup(spec, device, rank, world, prec, model, ddp, step_model, opt)


def write_summary(
    s: loop.Setup,
    totals: loop.Totals,
    run_dir: Path,
    setup_s: float,
    loop_s: float,
    profiler_s: float,
    cpu_share: dict[str, int],
) -> None:
    """summary.json, written last by rank 0: it marks the run finished. Every rank must call."""
    spec, device, cuda = s.spec, s.device, s.device.type == "cuda"
    mem, mem_kind = loop.peak_memory(device)
    (peak,) = loop.all_sum([mem], device, op=dist.ReduceOp.MAX)
    in_bytes, htod, n_copied, n_trained = loop.all_sum(
        [totals.input_bytes, totals.htod_bytes, totals.images_copied, totals.images_trained], device
    )
    # DALI on a GPU uploads the encoded files itself, out of this loop's sight: null HtoD
    htod_known = cuda and spec["loader"] != "dali"
    if s.rank != 0:
        return
    epochs = store.read_jsonl(run_dir / store.EPOCHS)
    compile_s = sum(e["compile_s"] for e in epochs)
    timed_s = sum(e["timed_s"] for e in epochs)
    store.write_json_atomic(
        run_dir / store.SUMMARY,
        {
            "name": vision_spec.run_name(spec),
            "status": "ok",
            "error": None,
            "total_time_s": round(loop_s, 3),
            "setup_time_s": round(setup_s, 3),
            "train_time_s": round(sum(e["train_time_s"] for e in epochs), 3),
            "profiler_s": round(profiler_s, 3),  # left out of every time here
            "final_test_accuracy_pct": round(totals.accuracy, 3),
            "final_train_loss": epochs[-1]["train_loss"] if epochs else None,
            "images_per_s": round(sum(e["images"] for e in epochs) / max(timed_s, 1e-9), 2),
            "compile_s": round(compile_s, 3) if spec["compile"] else None,
            "input_bytes_per_image": round(in_bytes / max(n_copied, 1), 1),
            "htod_bytes_per_image": round(htod / max(n_trained, 1), 1) if htod_known else None,
            "peak_memory_bytes": int(peak),
            "memory_kind": mem_kind,
            "precision_effective": s.prec.label,
            "input_dtype": str(s.prec.input_dtype).removeprefix("torch."),
            "rank0_batches_to_device": totals.copied,
            "rank0_batches_trained": totals.trained,
            "world_size": s.world,
            "device": torch.cuda.get_device_name(device) if cuda else "cpu",
            "runtime": provenance.torch_build(),
            **cpu_share,
        },
    )
