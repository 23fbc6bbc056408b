"""One vision rank's training: precision, model, optimizer, step, evaluation, and the epochs with
their timings (train.py builds DDP/compile and writes the summary; inputs.py the batches).

Timing-sensitive: inside a step the host reads nothing from the device (the loss is read once per
epoch), and nothing is written to a file until the epoch's steps are done.
"""

from __future__ import annotations

import contextlib
import resource
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.algorithms.join import Join
from torch.nn.parallel import DistributedDataParallel as DDP

from run import store
from run.node import profilers
from run.vision import inputs
from run.vision.tvcompat import import_torchvision


@dataclass
class Precision:
    model_dtype: torch.dtype
    input_dtype: torch.dtype
    autocast: Callable[[], Any]
    scaler: torch.amp.GradScaler | None
    label: str


def precision_setup(precision: str, device: torch.device) -> Precision:
    if precision in ("fp64", "fp32"):
        dtype = torch.float64 if precision == "fp64" else torch.float32
        return Precision(dtype, dtype, contextlib.nullcontext, None, precision)
    if precision not in ("bf16", "fp16"):
        raise ValueError(f"unknown precision {precision!r}")
    # fp16 autocast is of no use on a CPU: bf16 autocast stands in, labelled so
    fp16 = precision == "fp16" and device.type != "cpu"
    half = torch.float16 if fp16 else torch.bfloat16
    if fp16:
        label = "fp16-autocast+gradscaler"
    else:
        label = "bf16-autocast" if precision == "bf16" else "bf16-autocast (fp16 on CPU)"
    scaler = torch.amp.GradScaler(device.type) if fp16 else None
    autocast = lambda: torch.autocast(device.type, dtype=half)  # noqa: E731
    return Precision(torch.float32, half, autocast, scaler, label)


def model_for(spec: dict[str, Any], device: torch.device, prec: Any) -> torch.nn.Module:
    model = import_torchvision().models.mobilenet_v2(num_classes=10, width_mult=spec["width_mult"])
    model = model.to(device=device, dtype=prec.model_dtype)
    if spec["channels_last"]:
        model = model.to(memory_format=torch.channels_last)
    return model


def optimizer_for(params: Any, spec: dict[str, Any]) -> torch.optim.Optimizer:
    """Adam; fused=True runs the whole update as one kernel per device and dtype (chunked), where
    foreach (GPU) or the for-loop (CPU) launch a dozen or more per step."""
    return torch.optim.Adam(params, lr=spec["lr"], fused=True if spec["fused_optimizer"] else None)


def train_step(model: Any, opt: torch.optim.Optimizer, prec: Any, x: torch.Tensor,
               y: torch.Tensor) -> torch.Tensor:  # fmt: skip
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


def interval(phase: str, epoch: int, step: int | None, t0: float) -> dict[str, Any]:
    return {"phase": phase, "epoch": epoch, "step": step, "t0": t0, "t1": time.time()}


def peak_memory(device: torch.device) -> tuple[int, str]:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device), store.GPU_MAX_ALLOCATED
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, store.HOST_PEAK_RSS


def all_sum(
    values: list[float], device: torch.device, op: dist.ReduceOp.RedOpType = dist.ReduceOp.SUM
) -> list[float]:
    t = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(t, op=op)
    return t.tolist()


def compile_seconds(durations: list[float], compiled: list[bool]) -> float:
    """Seconds torch.compile added to an epoch: each compiling step (a short last batch compiles
    again) less the median of the others. Left out of images_per_s, so a compiled run compares
    with the ladder's eager steps (whose first steps keep their warm-up, as every run's do)."""
    plain = sorted(d for d, c in zip(durations, compiled, strict=True) if not c)
    typical = plain[len(plain) // 2] if plain else 0.0
    return sum(max(0.0, d - typical) for d, c in zip(durations, compiled, strict=True) if c)


def compiled_frames() -> int:
    from torch._dynamo.utils import counters

    return counters["frames"]["total"]


def evaluate(
    model: torch.nn.Module,
    loader: Iterable[tuple[torch.Tensor, torch.Tensor]],
    device: torch.device,
    spec: dict[str, Any],
    prec: Precision,
    timeline: list[dict[str, Any]] | None = None,
    epoch: int = 0,
) -> float:
    """Test accuracy in percent over all ranks' shards (plain module: no DDP syncs; one sync)."""
    model.eval()
    correct = torch.zeros((), dtype=torch.int64, device=device)
    total = 0
    with torch.no_grad():
        for i, (x, y) in enumerate(loader):
            x, y = inputs.to_device(x, y, device, spec, prec.input_dtype)
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


@dataclass
class Setup:
    spec: dict[str, Any]
    device: torch.device
    rank: int
    world: int
    prec: Precision
    model: torch.nn.Module  # the plain module: evaluation runs it eager, without DDP's syncs
    ddp: DDP
    step_model: Any  # what the step calls: ddp, or torch.compile(ddp)
    opt: torch.optim.Optimizer


@dataclass
class Totals:
    copied: int = 0  # batches sent to its device
    trained: int = 0  # batches trained on
    input_bytes: int = 0  # input bytes handed to the copy
    htod_bytes: int = 0  # of which host->device on CUDA
    images_copied: int = 0
    images_trained: int = 0
    accuracy: float = float("nan")  # the last evaluation's
    # written once at the end: no file I/O inside the loop
    timeline: list[dict[str, Any]] = field(default_factory=list)


Profiler = profilers.NoProfiler | profilers.TorchProfiler | profilers.NsysProfiler


def train_epochs(s: Setup, data: inputs.Loaders, prof: Profiler, epochs_file: Path) -> Totals:
    totals = Totals()
    with prof:  # writes this rank's trace on leaving if the window is still open
        for epoch in range(s.spec["epochs"]):
            row = run_epoch(s, data, prof, epoch, totals)
            if row is not None:
                store.append_jsonl(epochs_file, row)
                print(f"[vision] epoch {row}", flush=True)
    return totals


def run_epoch(
    s: Setup, data: inputs.Loaders, prof: Profiler, epoch: int, totals: Totals
) -> dict[str, Any] | None:
    """One epoch, timed between device syncs, and its evaluation; its row on rank 0, else None."""
    spec, device = s.spec, s.device
    cuda = device.type == "cuda"
    if data.sampler is not None:
        inputs.set_epoch(data.sampler, epoch, spec["seed"])
    if cuda:
        torch.cuda.synchronize()
    t0, t0_wall, p0 = time.monotonic(), time.time(), prof.seconds
    loss_sum, images, durations, compiled = epoch_steps(s, data.train, prof, epoch, totals)
    totals.images_trained += images
    if cuda:
        torch.cuda.synchronize()
    profiler_s = prof.seconds - p0  # torch.profiler writing its trace (run/node/profilers.py)
    train_s = time.monotonic() - t0 - profiler_s
    compile_s = compile_seconds(durations, compiled)
    totals.timeline.append(interval("epoch", epoch + 1, None, t0_wall))
    t1, t1_wall = time.monotonic(), time.time()
    totals.accuracy = evaluate(s.model, data.test, device, spec, s.prec, totals.timeline, epoch + 1)
    eval_s = time.monotonic() - t1
    totals.timeline.append(interval("eval", epoch + 1, None, t1_wall))
    total_loss, total_images = all_sum([float(loss_sum), images], device)
    slowest_train_s, slowest_timed_s, slowest_compile_s = all_sum(
        [train_s, train_s - compile_s, compile_s], device, op=dist.ReduceOp.MAX
    )
    if s.rank != 0:
        return None
    return {
        "epoch": epoch + 1,
        "train_time_s": round(slowest_train_s, 4),  # without torch.profiler's trace writing
        "compile_s": round(slowest_compile_s, 4),  # within train_time_s
        # the slowest rank's own train - compile: the two maxima above may come
        # from different ranks, so their difference is not a rank's time
        "timed_s": round(slowest_timed_s, 4),
        "eval_time_s": round(eval_s, 4),
        "images": int(total_images),
        "images_per_s": round(total_images / max(slowest_timed_s, 1e-9), 2),
        "train_loss": total_loss / max(total_images, 1),
        "test_accuracy_pct": round(totals.accuracy, 3),
    }


def epoch_steps(
    s: Setup,
    loader: Iterable[tuple[torch.Tensor, torch.Tensor]],
    prof: Profiler,
    epoch: int,
    totals: Totals,
) -> tuple[torch.Tensor, int, list[float], list[bool]]:
    """One epoch's steps: the loss summed on the device, images trained, each step's host time
    and whether it compiled. Every batch is copied; round robin trains on its share only."""
    spec, device, prec, world, rank = s.spec, s.device, s.prec, s.world, s.rank
    ddp, step_model, opt, timeline = s.ddp, s.step_model, s.opt, totals.timeline
    cuda = device.type == "cuda"
    round_robin = spec["strategy"] == "ddp_rr"
    loss_sum = torch.zeros((), dtype=torch.float64, device=device)
    images = 0
    durations: list[float] = []  # host time of each step, and whether it compiled
    compiled: list[bool] = []
    # Join only for round robin: its ranks run out of batches at different steps and Join
    # shadows the missing all-reduces (it costs an extra collective per step).
    with Join([ddp]) if round_robin else contextlib.nullcontext():
        for i, (x, y) in enumerate(loader):
            totals.input_bytes += x.nbytes
            totals.htod_bytes += x.nbytes if cuda and x.device.type == "cpu" else 0
            totals.images_copied += len(y)
            # every batch goes to this rank's GPU, also those another rank trains on
            x, y = inputs.to_device(x, y, device, spec, prec.input_dtype)
            totals.copied += 1
            if not inputs.keeps_batch(spec["strategy"], i, world, rank):
                continue
            t_step = time.time()
            frames = compiled_frames() if spec["compile"] else 0
            totals.trained += 1
            loss = train_step(step_model, opt, prec, x, y)
            loss_sum += loss.detach().double() * y.numel()
            images += y.numel()
            p0 = prof.seconds
            prof.step()
            # Host times, no sync: where the host does not wait (pinned, host_sync=epoch) they
            # are the times to issue the step; the device's time shows in the epoch's total.
            timeline.append(interval("train_step", epoch + 1, i, t_step))
            wrote = prof.seconds - p0
            if wrote:  # this step wrote the trace: analysis/steady.py leaves it out
                timeline[-1]["profiler_s"] = wrote
            durations.append(timeline[-1]["t1"] - t_step - wrote)
            compiled.append(spec["compile"] and compiled_frames() > frames)
    return loss_sum, images, durations, compiled
