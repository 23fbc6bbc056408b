"""Vision workload: torchvision MobileNetV2 trained on MNIST (Scenario A) under DDP.

The sweep launches every run as (the exact command is the first line of each run's log.txt):

    torchrun --standalone --nproc_per_node=N -m run.vision --spec RUN/spec.json --run-dir RUN

With `profiler: torch` each rank records a torch.profiler window (RUN/torch_traces/rankR...);
with `profiler: nsys` the sweep starts every rank under `nsys profile` and the loop opens and
closes its capture range. run/node/profiling.py holds both and the window; `none` is a no-op.

gloo ranks on CPU, NCCL with one GPU per rank on a GPU node. Read top to bottom: set-up, data,
model and precision, the training loop with its three strategies, evaluation, summary.

Strategies (EXPERIMENTS.md):
  ddp     every rank trains on the whole data set (N ranks do N times the work)
  ddp_rr  every rank loads every batch and copies it to its GPU ("all data is still being sent to
          all GPUs"), but trains only on batches i with i % world == rank; wrapped in Join, since
          ranks run out of batches at different steps
  ddp_ds  DistributedSampler: each rank loads and trains on its own shard only
DDP and DDP-DS are plain DDP: no Join, no collective beyond DDP's gradient all-reduce per step.

Precision: the input batch is cast on the host (in the DataLoader, before pinning) to the dtype
the precision computes in (fp64 double, fp32 float, fp16 half, bf16 bfloat16), so the
host-to-device bytes follow the precision as in the paper's profiles (HtoD 226 / 104 / 50 s for
FP64 / FP32 / FP16). FP16 keeps the model in fp32 under autocast with a GradScaler (mixed
precision, as the paper's "FP16 mixed"). The running loss is summed on the device and read once
per epoch: no per-step host synchronisation beyond what the paper's loop has.

Optimisations (issue 20; each off by default, so the faithful runs keep their loop and names):
  upsample=device   the loader yields the stored uint8 28x28 images; the batch is copied as uint8
                    and converted, normalised and upsampled on the device (upsample_on_device):
                    the host-to-device bytes follow the stored image, not the image_size tensor
  fused_optimizer   Adam(fused=True)
  compile           torch.compile of the DDP-wrapped model; the steps that compiled are timed as
                    compile_s and left out of images_per_s (see compile_seconds)
  host_sync=epoch   copies are issued non_blocking even from pageable memory (the driver may
                    still stage those synchronously): today's loop waits once per step when
                    pin_memory is off (a blocking copy). Matrix O1's step sets pin_memory with
                    it, so no step waits for the device.
summary.json also gives input_bytes_per_image (the input batch as handed to the copy, per image)
and htod_bytes_per_image (bytes this loop copied host->device per trained image; CUDA only).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.algorithms.join import Join
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import (
    DataLoader,
    Dataset,
    DistributedSampler,
    RandomSampler,
    Subset,
    TensorDataset,
)

from run import store
from run.node import probe, profilers, provenance
from run.vision import digits, launch, scenario_b
from run.vision import spec as vision_spec
from run.vision.tvcompat import import_torchvision

T_START = time.monotonic()
# MNIST's mean and std of the grey channel, repeated for the three channels MobileNetV2 takes.
MNIST_MEAN, MNIST_STD = (0.1307,) * 3, (0.3081,) * 3


class ToDtype:
    """Last step of the transform: the sample in the dtype the precision computes in, so the
    DataLoader pins (and the GPU receives) exactly that many bytes. A class, not a lambda, so
    DataLoader workers can pickle it."""

    def __init__(self, dtype: torch.dtype) -> None:
        self.dtype = dtype

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return x.to(self.dtype)


def scenario_a_transform(size: int, dtype: torch.dtype = torch.float32):  # noqa: ANN201
    """Upsample 28x28 grey to size x size on the CPU, make it 3-channel, normalise, cast."""
    transforms = import_torchvision().transforms
    return transforms.Compose(
        [
            transforms.Resize((size, size)),
            transforms.Grayscale(num_output_channels=3),
            transforms.ToTensor(),
            transforms.Normalize(MNIST_MEAN, MNIST_STD),
            ToDtype(dtype),
        ]
    )


def upsample_on_device(
    x: torch.Tensor,
    size: int,
    dtype: torch.dtype,
    memory_format: torch.memory_format = torch.contiguous_format,
) -> torch.Tensor:
    """scenario_a_transform for a whole uint8 (N, 28, 28) batch where it lies (the device), so
    the model sees the same inputs: torchvision's Resize on a PIL image is PIL's antialiased
    bilinear resize, which resamples the rows, rounds to 8 bits (half up), then the columns and
    rounds again; then grey to 3 channels, ToTensor's /255, Normalize, the cast. Computed in
    float32 like the host path, cast last. (PIL's fixed-point weights may still put a pixel one
    level away: tests/test_vision_unit.py measures it.)"""
    x = x.unsqueeze(1).float()
    for rows in (x.shape[-2], size):  # width first, then height, as PIL does
        x = F.interpolate(x, size=(rows, size), mode="bilinear", antialias=True)
        x = x.add_(0.5).floor_().clamp_(0, 255)
    x = (x / 255 - MNIST_MEAN[0]) / MNIST_STD[0]
    # .to() hands back the expanded view itself when dtype and layout already match (fp32,
    # contiguous_format): a stride-0 channel dim. Make it a real batch in the asked layout.
    return x.expand(-1, 3, -1, -1).to(dtype=dtype).contiguous(memory_format=memory_format)


def model_for(spec: dict[str, Any], device: torch.device, prec: Any) -> torch.nn.Module:
    """MobileNetV2 for 10 classes at the spec's width, on `device` in the model dtype and the
    spec's memory format (not yet wrapped or compiled)."""
    model = import_torchvision().models.mobilenet_v2(num_classes=10, width_mult=spec["width_mult"])
    model = model.to(device=device, dtype=prec.model_dtype)
    if spec["channels_last"]:
        model = model.to(memory_format=torch.channels_last)
    return model


def optimizer_for(params: Any, spec: dict[str, Any]) -> torch.optim.Optimizer:
    """Adam at the spec's learning rate. fused=True runs Adam's whole update as one fused kernel
    over the parameter group (per device and dtype, in chunks of tensors), where the default
    launches one kernel per elementwise op over the tensor list (foreach, on a GPU) or several per
    parameter tensor (the for-loop, on a CPU): a dozen or more launches per step become one or a
    few."""
    return torch.optim.Adam(params, lr=spec["lr"], fused=True if spec["fused_optimizer"] else None)


def train_step(model: Any, opt: torch.optim.Optimizer, prec: Any, x: torch.Tensor,
               y: torch.Tensor) -> torch.Tensor:  # fmt: skip
    """One optimizer step on a batch already on the device (GradScaler for FP16); the loss."""
    with prec.autocast():
        loss = F.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=True)
    if prec.scaler is not None:
        prec.scaler.scale(loss).backward()
        prec.scaler.step(opt)
        prec.scaler.update()
    else:
        loss.backward()
        opt.step()
    return loss


def make_sampler(strategy: str, dataset_len: int, world: int, rank: int, seed: int):  # noqa: ANN201
    """The sampler each strategy's training loader draws from (same order on all ranks but DS)."""
    if strategy == "ddp_ds":
        return DistributedSampler(range(dataset_len), num_replicas=world, rank=rank, seed=seed)
    return RandomSampler(range(dataset_len), generator=torch.Generator().manual_seed(seed))


def set_epoch(sampler, epoch: int, seed: int) -> None:  # noqa: ANN001
    if isinstance(sampler, DistributedSampler):
        sampler.set_epoch(epoch)
    else:
        sampler.generator.manual_seed(seed + epoch)


def keeps_batch(strategy: str, batch_index: int, world: int, rank: int) -> bool:
    """Round robin trains on every world-th batch; the other strategies on all they load."""
    return strategy != "ddp_rr" or batch_index % world == rank


def rank_batches(
    strategy: str, n: int, batch_size: int, world: int, rank: int, epoch: int = 0, seed: int = 0
) -> list[list[int]]:
    """The sample indices rank `rank` trains on in one epoch, batch by batch (used by the tests)."""
    sampler = make_sampler(strategy, n, world, rank, seed)
    set_epoch(sampler, epoch, seed)
    order = list(sampler)
    batches = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    return [b for i, b in enumerate(batches) if keeps_batch(strategy, i, world, rank)]


@dataclass
class Precision:
    """How a precision runs: model dtype, input dtype, autocast, loss scaling, and its label."""

    model_dtype: torch.dtype
    input_dtype: torch.dtype
    autocast: Callable[[], Any]
    scaler: torch.amp.GradScaler | None
    label: str


def precision_setup(precision: str, device: torch.device) -> Precision:
    if precision == "fp64":
        return Precision(torch.float64, torch.float64, contextlib.nullcontext, None, "fp64")
    if precision == "fp32":
        return Precision(torch.float32, torch.float32, contextlib.nullcontext, None, "fp32")
    if precision == "bf16" or (precision == "fp16" and device.type == "cpu"):
        # fp16 autocast is of no use on a CPU; bf16 autocast is its CPU stand-in, labelled so.
        label = "bf16-autocast" if precision == "bf16" else "bf16-autocast (fp16 on CPU)"
        return Precision(
            torch.float32,
            torch.bfloat16,
            lambda: torch.autocast(device.type, dtype=torch.bfloat16),
            None,
            label,
        )
    if precision == "fp16":
        return Precision(
            torch.float32,
            torch.float16,
            lambda: torch.autocast(device.type, dtype=torch.float16),
            torch.amp.GradScaler(device.type),
            "fp16-autocast+gradscaler",
        )
    raise ValueError(f"unknown precision {precision!r}")


def data_sets(spec: dict[str, Any], dtype: torch.dtype = torch.float32) -> tuple[Dataset, Dataset]:
    """Scenario A's train and test sets: each image upsampled on the host as it is loaded
    (upsample=host), or the stored uint8 28x28 tensors as they are (upsample=device)."""
    datasets = import_torchvision().datasets
    root = digits.data_root(spec["dataset"])
    host = spec["upsample"] == "host"
    tf = scenario_a_transform(spec["image_size"], dtype) if host else None
    train = datasets.MNIST(str(root), train=True, download=False, transform=tf)
    test = datasets.MNIST(str(root), train=False, download=False, transform=tf)
    n, m = spec["train_images"], spec["test_images"]
    if len(train) < n or len(test) < m:
        raise ValueError(
            f"{root} holds {len(train)}/{len(test)} train/test images; the spec needs {n}/{m}"
        )
    if host:
        return Subset(train, range(n)), Subset(test, range(m))
    return TensorDataset(train.data[:n], train.targets[:n]), TensorDataset(
        test.data[:m], test.targets[:m]
    )


def interval(phase: str, epoch: int, step: int | None, t0: float) -> dict[str, Any]:
    """One line of the rank's timeline (store.TIMELINE), ending now."""
    return {"phase": phase, "epoch": epoch, "step": step, "t0": t0, "t1": time.time()}


def peak_memory(device: torch.device) -> tuple[int, str]:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device), "gpu_max_allocated"
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "host_peak_rss"


def all_sum(values: list[float], device: torch.device, op=dist.ReduceOp.SUM) -> list[float]:  # noqa: ANN001
    t = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(t, op=op)
    return t.tolist()


def to_device(x: torch.Tensor, y: torch.Tensor, device: torch.device, spec: dict[str, Any],
              dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """One batch to the GPU as it left the DataLoader: already in the input dtype, or (upsample
    =device) the stored uint8 images, made into the model's input there.

    A blocking copy (non_blocking=False) makes the host wait for the device: today's loop with
    pin_memory off. host_sync=epoch issues the copy non_blocking: from pageable memory the driver
    stages the batch before the call returns (it may synchronise with the stream to do so, CUDA's
    API sync behaviour), so the DataLoader may reuse it; from pinned memory the caching host
    allocator keeps the block until the copy is done."""
    non_blocking = spec["pin_memory"] or spec["host_sync"] == "epoch"
    x = x.to(device, non_blocking=non_blocking)
    y = y.to(device, non_blocking=non_blocking)
    fmt = torch.channels_last if spec["channels_last"] else torch.contiguous_format
    if spec["upsample"] == "device":
        x = upsample_on_device(x, spec["image_size"], dtype, fmt)
    elif spec["channels_last"] and not x.is_contiguous(memory_format=fmt):
        x = x.contiguous(memory_format=fmt)
    return x, y


def compile_seconds(durations: list[float], compiled: list[bool]) -> float:
    """Seconds that torch.compile added to an epoch: each step in which it compiled (a new
    batch shape compiles again, e.g. a short last batch) less the median of the others, the
    time that step would have taken. Left out of images_per_s, so that a compiled run's speed is
    comparable with the eager steps of the ladder (whose first steps keep their own warm-up, as
    every run's do)."""
    plain = sorted(d for d, c in zip(durations, compiled, strict=True) if not c)
    typical = plain[len(plain) // 2] if plain else 0.0
    return sum(max(0.0, d - typical) for d, c in zip(durations, compiled, strict=True) if c)


def compiled_frames() -> int:
    """Frames dynamo has compiled so far in this process (grows on every compile/recompile)."""
    from torch._dynamo.utils import counters

    return counters["frames"]["total"]


def evaluate(model, loader, device, spec, prec: Precision, timeline=None, epoch=0) -> float:  # noqa: ANN001
    """Test accuracy in percent over all ranks' shards (on the plain module: no DDP syncs).
    Counts stay on the device until the end: one synchronisation per evaluation."""
    model.eval()
    correct = torch.zeros((), dtype=torch.int64, device=device)
    total = 0
    with torch.no_grad():
        for i, (x, y) in enumerate(loader):
            x, y = to_device(x, y, device, spec, prec.input_dtype)
            t0 = time.time()
            with prec.autocast():
                pred = model(x).argmax(1)
            correct += (pred == y).sum()
            total += y.numel()
            if timeline is not None:
                timeline.append(interval("eval_step", epoch, i, t0))
    model.train()
    c, t = all_sum([float(correct), total], device)
    return 100.0 * c / max(t, 1)


def check_inputs(spec_path: Path) -> dict[str, Any]:
    """The run spec, checked against this launch and this machine before anything starts."""
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
    world = int(os.environ.get("WORLD_SIZE", 1))
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--spec", type=Path, required=True, help="resolved run spec (JSON)")
    ap.add_argument("--run-dir", type=Path, required=True, help="where epochs and summary go")
    args = ap.parse_args(argv)
    try:
        spec = check_inputs(args.spec)
    except (ValueError, FileNotFoundError) as exc:  # UserError is a ValueError
        # Bad input: one line from rank 0, no process group, nothing written into the run folder.
        if int(os.environ.get("RANK", 0)) == 0:
            print(f"error: {exc}", file=sys.stderr, flush=True)
        return 2
    cuda = torch.cuda.is_available()
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if cuda:
        # bound before anything touches CUDA (unsupported_reason asks about bf16 and Triton):
        # else every rank opens a context on GPU 0, memory its peak and NCCL would then share
        torch.cuda.set_device(torch.device("cuda", local_rank))
    reason = vision_spec.unsupported_reason(spec)
    if reason:
        # What this machine cannot run is a result, not an error: recorded, nothing trained (the
        # sweep records it the same way without launching; this covers a run started by hand).
        if int(os.environ.get("RANK", 0)) == 0:
            name = vision_spec.run_name(spec)
            store.write_json_atomic(
                args.run_dir / store.SUMMARY,
                {"status": "unsupported", "error": reason, "name": name},
            )
            print(f"[vision] {name}: unsupported: {reason}", flush=True)
        return 0

    # --- set-up: one process per rank, NCCL on GPUs (device bound first), gloo on CPU ------------
    if cuda:
        device = torch.device("cuda", local_rank)
        dist.init_process_group("nccl", device_id=device)
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo")
        local_world = int(os.environ.get("LOCAL_WORLD_SIZE", os.environ.get("WORLD_SIZE", 1)))
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // local_world))
    try:
        return train(spec, args.run_dir, device)
    finally:
        dist.destroy_process_group()


def train(spec: dict[str, Any], run_dir: Path, device: torch.device) -> int:
    """Data, model, the training loop and the summary of one rank."""
    cuda = device.type == "cuda"
    rank, world = dist.get_rank(), dist.get_world_size()
    if rank == 0:
        print(
            f"[vision] {vision_spec.run_name(spec)}: world={world} device={device.type}", flush=True
        )
    torch.manual_seed(spec["seed"])
    prec = precision_setup(spec["precision"], device)

    # --- data: Scenario A (MNIST files upsampled on the fly) or B (prepared JPEGs, J 4.3) -------
    sampler = None
    if spec["loader"] == "dali":  # DALI reads, decodes and shards the prepared files itself
        path = scenario_b.for_spec(spec)
        dali = dict(batch=spec["batch_size"], rank=rank, world=world, seed=spec["seed"],
                    device_id=device.index if cuda else None, nhwc=spec["channels_last"],
                    labels_on_gpu=spec["host_sync"] == "epoch")  # fmt: skip
        train_loader = scenario_b.DaliLoader(path, "train", shuffle=True, **dali)
        test_loader = scenario_b.DaliLoader(path, "test", shuffle=False, **dali)
    else:
        if spec["scenario"] == "B":  # every rank unpacks the whole set into host memory
            path = scenario_b.for_spec(spec)
            train_set = scenario_b.Unpacked(path, "train", prec.input_dtype)
            test_set = scenario_b.Unpacked(path, "test", prec.input_dtype)
        else:
            train_set, test_set = data_sets(spec, prec.input_dtype)
        sampler = make_sampler(spec["strategy"], len(train_set), world, rank, spec["seed"])
        loader_kw = dict(
            batch_size=spec["batch_size"],
            num_workers=spec["num_workers"],
            pin_memory=spec["pin_memory"],
            persistent_workers=spec["num_workers"] > 0,
        )
        train_loader = DataLoader(train_set, sampler=sampler, **loader_kw)
        # Evaluation is sharded alike for every strategy: rank r scores test images r, r+W, ...
        test_loader = DataLoader(Subset(test_set, range(rank, len(test_set), world)), **loader_kw)

    # --- model and precision ---------------------------------------------------------------------
    model = model_for(spec, device, prec)
    ddp = DDP(model, device_ids=[device.index] if cuda else None)
    # Compiled after wrapping, as torch 2.13 intends for DDP: dynamo's DDPOptimizer
    # (torch._dynamo.config.optimize_ddp, on by default) splits the graph at DDP's bucket
    # boundaries, so each bucket's all-reduce still overlaps the rest of the backward. Evaluation
    # runs the plain module, eager: compile time is spent on training shapes only.
    step_model = torch.compile(ddp) if spec["compile"] else ddp
    opt = optimizer_for(ddp.parameters(), spec)
    setup_s = time.monotonic() - T_START

    # --- profiler: a no-op unless the spec asks for one; its window fits this rank's steps -------
    steps = vision_spec.planned_steps(spec, rank)
    prof = profilers.profiler_for(spec, run_dir, rank, steps)

    # --- training loop -----------------------------------------------------------------------------
    epochs_file = run_dir / store.EPOCHS
    t_loop = time.monotonic()
    accuracy = float("nan")
    round_robin = spec["strategy"] == "ddp_rr"
    copied = trained = 0  # this rank's batches sent to its device / trained on (whole run)
    # input bytes handed to the copy, of which host->device on CUDA; images copied / trained
    input_bytes = htod_bytes = images_copied = images_trained = 0
    timeline: list[dict[str, Any]] = []  # written once at the end: no file I/O inside the loop
    with prof:  # writes this rank's trace on leaving if the window is still open
        for epoch in range(spec["epochs"]):
            if sampler is not None:
                set_epoch(sampler, epoch, spec["seed"])
            if cuda:
                torch.cuda.synchronize()
            t0, t0_wall = time.monotonic(), time.time()
            loss_sum = torch.zeros((), dtype=torch.float64, device=device)
            images = 0
            durations: list[float] = []  # host time of each step, and whether it compiled
            compiled: list[bool] = []
            # Join only for round robin: its ranks run out of batches at different steps and Join
            # shadows the missing all-reduces (it costs an extra collective per step).
            with Join([ddp]) if round_robin else contextlib.nullcontext():
                for i, (x, y) in enumerate(train_loader):
                    input_bytes += x.nbytes
                    htod_bytes += x.nbytes if cuda and x.device.type == "cpu" else 0
                    images_copied += len(y)
                    # every batch goes to this rank's GPU, also those another rank trains on
                    x, y = to_device(x, y, device, spec, prec.input_dtype)
                    copied += 1
                    if not keeps_batch(spec["strategy"], i, world, rank):
                        continue
                    t_step = time.time()
                    frames = compiled_frames() if spec["compile"] else 0
                    trained += 1
                    loss = train_step(step_model, opt, prec, x, y)
                    loss_sum += loss.detach().double() * y.numel()
                    images += y.numel()
                    prof.step()
                    # Host times, written without a sync in both host_sync modes: where the host
                    # does not wait for the device (pinned copies, host_sync=epoch) they are the
                    # times to issue the step, and the device's time shows in the epoch's total.
                    timeline.append(interval("train_step", epoch + 1, i, t_step))
                    durations.append(timeline[-1]["t1"] - t_step)
                    compiled.append(spec["compile"] and compiled_frames() > frames)
            images_trained += images
            if cuda:
                torch.cuda.synchronize()
            train_s = time.monotonic() - t0
            compile_s = compile_seconds(durations, compiled)
            timeline.append(interval("epoch", epoch + 1, None, t0_wall))
            t1, t1_wall = time.monotonic(), time.time()
            accuracy = evaluate(model, test_loader, device, spec, prec, timeline, epoch + 1)
            eval_s = time.monotonic() - t1
            timeline.append(interval("eval", epoch + 1, None, t1_wall))
            total_loss, total_images = all_sum([float(loss_sum), images], device)
            slowest_train_s, slowest_timed_s, slowest_compile_s = all_sum(
                [train_s, train_s - compile_s, compile_s], device, op=dist.ReduceOp.MAX
            )
            if rank == 0:
                row = {
                    "epoch": epoch + 1,
                    "train_time_s": round(slowest_train_s, 4),
                    "compile_s": round(slowest_compile_s, 4),  # within train_time_s
                    # the slowest rank's own train - compile: the two maxima above may come
                    # from different ranks, so their difference is not a rank's time
                    "timed_s": round(slowest_timed_s, 4),
                    "eval_time_s": round(eval_s, 4),
                    "images": int(total_images),
                    "images_per_s": round(total_images / max(slowest_timed_s, 1e-9), 2),
                    "train_loss": total_loss / max(total_images, 1),
                    "test_accuracy_pct": round(accuracy, 3),
                }
                store.append_jsonl(epochs_file, row)
                print(f"[vision] epoch {row}", flush=True)
    loop_s = time.monotonic() - t_loop
    store.write_text_atomic(store.timeline_file(run_dir, rank),
                            "".join(json.dumps(e) + "\n" for e in timeline))  # fmt: skip

    # --- summary: written last, atomically; its presence marks the run as finished ---------------
    mem, mem_kind = peak_memory(device)
    (peak,) = all_sum([mem], device, op=dist.ReduceOp.MAX)
    in_bytes, htod, n_copied, n_trained = all_sum(
        [input_bytes, htod_bytes, images_copied, images_trained], device
    )
    # DALI on a GPU decodes there ("mixed"): it uploads the encoded files itself, out of this
    # loop's sight, so its HtoD bytes are not measured here (null, like a CPU's).
    htod_known = cuda and spec["loader"] != "dali"
    if rank == 0:
        epochs = store.read_jsonl(epochs_file)
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
                "final_test_accuracy_pct": round(accuracy, 3),
                "final_train_loss": epochs[-1]["train_loss"] if epochs else None,
                "images_per_s": round(sum(e["images"] for e in epochs) / max(timed_s, 1e-9), 2),
                "compile_s": round(compile_s, 3) if spec["compile"] else None,
                "input_bytes_per_image": round(in_bytes / max(n_copied, 1), 1),
                "htod_bytes_per_image": round(htod / max(n_trained, 1), 1) if htod_known else None,
                "peak_memory_bytes": int(peak),
                "memory_kind": mem_kind,
                "precision_effective": prec.label,
                "input_dtype": str(prec.input_dtype).removeprefix("torch."),
                "rank0_batches_to_device": copied,
                "rank0_batches_trained": trained,
                "world_size": world,
                "device": torch.cuda.get_device_name(device) if cuda else "cpu",
                "runtime": provenance.torch_build(),
            },
        )
    return 0
