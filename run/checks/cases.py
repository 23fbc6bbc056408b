"""The check list of `make gpu-check` (run/checks/runner.py): each check a small run spec, the
device it needs, and the assertions its finished run must pass on CUDA and on a CPU. The CPU test
tier (tests/test_gpu_check.py) runs the same list on gloo ranks, so it cannot rot unnoticed.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from run import store
from run.llm import spec as llm_spec
from run.node import profiling
from run.sweep.workloads import WORKLOADS
from run.vision import spec as vision_spec

VISION = {
    **vision_spec.DEFAULTS,
    "dataset": "digits",
    # 4 batches of 32: DDP, DDP-RR and DDP-DS still load and train different batch counts at 2
    # ranks (4/4, 4/2, 2/2), and the torch.profiler window (3 active steps) still fits
    "train_images": 128,
    "test_images": 64,
    "epochs": 1,
    "batch_size": 32,
    "image_size": 32,
    "num_workers": 0,
}
# Large enough to exhaust an H200's 141 GB: MobileNetV2 keeps about 0.8 GB of activations per
# 640 px fp32 image for the backward pass, so one batch of 256 asks for about 200 GB.
VISION_OOM = {"train_images": 256, "test_images": 32, "batch_size": 256, "image_size": 640}
UP_TO_2 = -2  # `gpus` of a check: 2 ranks where the machine has them, else 1
# Two epochs over the same 8 rows, unshuffled, at a rate the tiny model learns from: the second
# epoch sees the first one's batches again, so its loss must be lower (`learns`). The CPU tier's
# tests read these runs (tests/real_runs.py), so the shape is the one they check.
LLM = {
    **llm_spec.DEFAULTS,
    "dataset": "error-correction",
    "template_rows": 8,
    "epochs": 2,
    "shuffle": False,
    "warmup_steps": 0,
    "lr": 3e-3,
}


@dataclass
class Seen:
    """What a finished check run left, for its assertions."""

    summary: dict[str, Any]
    run_dir: Path
    cuda: bool
    world: int

    def metrics(self) -> dict[str, dict[str, float]]:
        """RUN/profile_metrics.csv summed per metric over ranks: {metric: {calls, total_s, bytes}}."""
        path = self.run_dir / profiling.PROFILE_METRICS
        out: dict[str, dict[str, float]] = {}
        if not path.is_file():
            return out
        with open(path) as fh:
            for row in csv.DictReader(fh):
                m = out.setdefault(row["metric"], {"calls": 0, "total_s": 0.0, "bytes": 0})
                m["calls"] += int(row["calls"] or 0)
                m["total_s"] += float(row["total_s"] or 0)
                m["bytes"] += int(float(row["bytes"])) if row.get("bytes") else 0
        return out

    def steps(self) -> list[dict[str, Any]]:
        return store.read_jsonl(self.run_dir / store.STEPS)


Assertion = Callable[[Seen], list[str]]


@dataclass
class Check:
    name: str
    workload: str
    spec: dict[str, Any]
    what: str
    needs: str = "any"  # any | cuda | multi (two or more ranks: GPUs, or CPU cores for gloo)
    expect: list[Assertion] = field(default_factory=list)
    status: str = "ok"  # the run status the check wants
    cpu_skip: str = ""  # why the check cannot run on a CPU (needs "cuda" only)
    # On a CPU only: keys added to the spec so that the check reads another check's run there
    # (run_checks runs identical specs once); on CUDA every check runs its own spec.
    cpu_spec: dict[str, Any] = field(default_factory=dict)


# --- assertions: each returns the problems it found ----------------------------------------------


def _eq(key: str, cuda: Any, cpu: Any = None) -> Assertion:
    def check(s: Seen) -> list[str]:
        want = cuda if s.cuda or cpu is None else cpu
        got = s.summary.get(key)
        return [] if got == want else [f"{key} is {got!r}, expected {want!r}"]

    return check


def gpu_memory(s: Seen) -> list[str]:
    kind, peak = s.summary.get("memory_kind"), s.summary.get("peak_memory_bytes") or 0
    if not s.cuda:
        return [] if kind == store.HOST_PEAK_RSS else ["memory_kind not host"]
    if kind not in store.GPU_MEMORY or peak <= 0:
        return [f"peak memory from the GPU allocator missing ({kind}, {peak})"]
    return []


def min_peak_gib(gib: float) -> Assertion:
    def check(s: Seen) -> list[str]:
        peak = (s.summary.get("peak_memory_bytes") or 0) / 1024**3
        return [] if peak >= gib else [f"peak memory {peak:.1f} GiB, expected >= {gib} GiB"]

    return check


def profiled(*cuda_metrics: str, need_bytes: tuple[str, ...] = ()) -> Assertion:
    """A profile was read into metrics; on CUDA these metrics have calls (and bytes)."""

    def check(s: Seen) -> list[str]:
        got = s.metrics()
        if not got:
            return ["no profile_metrics.csv (no trace written or read)"]
        if not s.cuda:
            cuda = [m for m in got if not m.startswith("cpu:")]
            return [f"CUDA metrics in a CPU profile: {cuda}"] if cuda else []
        out = [
            f"{m}: no calls in the trace"
            for m in cuda_metrics
            if got.get(m, {}).get("calls", 0) <= 0
        ]
        out += [f"{m}: no bytes" for m in need_bytes if got.get(m, {}).get("bytes", 0) <= 0]
        return out

    return check


def window_recorded(s: Seen) -> list[str]:
    plan = s.run_dir / "profiling.json"
    if not plan.is_file() or "effective" not in store.read_json(plan):
        return ["profiling.json lacks the window the run used"]
    return []


def batches_of(strategy: str) -> Assertion:
    """Rank 0's batches copied to its device and trained on, as the strategy defines them."""

    def check(s: Seen) -> list[str]:
        n, bs, world = VISION["train_images"], VISION["batch_size"], s.world
        every = math.ceil(n / bs)
        shard = math.ceil(math.ceil(n / world) / bs)
        want = {
            "ddp": (every, every),
            "ddp_rr": (every, len(range(0, every, world))),
            "ddp_ds": (shard, shard),
        }[strategy]
        got = (s.summary.get("rank0_batches_to_device"), s.summary.get("rank0_batches_trained"))
        return (
            [] if got == want else [f"rank 0 batches (to device, trained) {got}, expected {want}"]
        )

    return check


def nccl_or_gloo(cpu_op: str) -> Assertion:
    """Multi-rank collectives in the profile: NCCL kernels on GPUs, the gloo op on a CPU."""

    def check(s: Seen) -> list[str]:
        got = s.metrics()
        if s.cuda:
            calls = sum(v["calls"] for m, v in got.items() if m.startswith("nccl_"))
            return [] if calls > 0 else ["no NCCL kernel in the trace"]
        return [] if f"cpu:{cpu_op}" in got else [f"no {cpu_op} in the CPU trace"]

    return check


def torchtune_memory(s: Seen) -> list[str]:
    """torchtune's log_peak_memory_stats rows in steps.jsonl (CUDA only; host RSS on a CPU)."""
    steps = s.steps()
    if not steps:
        return ["steps.jsonl is empty"]
    key = "peak_memory_active" if s.cuda else "host_peak_rss_bytes"
    missing = [r.get("step") for r in steps if not isinstance(r.get(key), (int, float))]
    return [f"steps without {key}: {missing}"] if missing else []


def learns(s: Seen) -> list[str]:
    """Every step's loss finite, and the second epoch's mean loss below the first's: the same
    batches again after training on them (LLM's two unshuffled epochs)."""
    per_epoch = s.summary.get("batches_per_epoch") or 0
    losses = [r.get("loss") for r in s.steps()]
    if per_epoch < 1 or len(losses) != 2 * per_epoch:
        return [f"{len(losses)} steps, expected two epochs of {per_epoch}"]
    if not all(isinstance(v, float) and math.isfinite(v) for v in losses):
        return [f"a loss is not a finite number: {losses}"]
    first, second = losses[:per_epoch], losses[per_epoch:]
    if sum(second) / per_epoch < sum(first) / per_epoch:
        return []
    return [f"the second epoch's loss did not fall below the first's: {losses}"]


def oom_recorded(s: Seen) -> list[str]:
    err = str(s.summary.get("error") or "")
    return [] if "out of memory" in err.lower() else [f"error does not say out of memory: {err}"]


# --- the check list -------------------------------------------------------------------------------

CHECKS: list[Check] = [
    Check("vision-fp64", "vision", {"precision": "fp64"}, "model and input in double",
          expect=[_eq("precision_effective", "fp64"), _eq("input_dtype", "float64"), gpu_memory]),
    Check("vision-fp32-torch-profiler", "vision", {"profiler": "torch"},
          "torch.profiler window: kernel launches, HtoD copies with bytes, stream syncs",
          expect=[_eq("input_dtype", "float32"), gpu_memory, window_recorded,
                  profiled("cudaLaunchKernel", "memcpy_htod", "cudaStreamSynchronize",
                           need_bytes=("memcpy_htod",))]),
    Check("vision-fp16-gradscaler", "vision", {"precision": "fp16"},
          "half inputs, autocast and GradScaler (bf16 autocast on a CPU)",
          expect=[_eq("precision_effective", "fp16-autocast+gradscaler",
                      "bf16-autocast (fp16 on CPU)"),
                  _eq("input_dtype", "float16", "bfloat16"), gpu_memory]),
    Check("vision-bf16-channels-last", "vision", {"precision": "bf16", "channels_last": True},
          "bf16 autocast with NHWC tensors",
          expect=[_eq("precision_effective", "bf16-autocast"), _eq("input_dtype", "bfloat16")]),
    Check("vision-pin-memory", "vision", {"pin_memory": True}, "pinned host batches",
          expect=[gpu_memory]),
    Check("vision-ddp", "vision", {"strategy": "ddp", "gpus": UP_TO_2},
          "DDP: every batch on every rank", expect=[batches_of("ddp"), gpu_memory]),
    Check("vision-ddp-rr", "vision", {"strategy": "ddp_rr", "gpus": UP_TO_2},
          "DDP-RR under Join: every batch sent to every rank, every world-th trained",
          expect=[batches_of("ddp_rr")]),
    # On a CPU, multi-vision-ddp-allreduce's run (the same spec, torch-profiled) serves it too
    Check("vision-ddp-ds", "vision", {"strategy": "ddp_ds", "gpus": UP_TO_2},
          "DDP-DS: each rank loads its DistributedSampler shard", expect=[batches_of("ddp_ds")],
          cpu_spec={"profiler": "torch"}),
    Check("vision-oom", "vision", VISION_OOM, "a batch too large for the GPU is recorded as oom",
          needs="cuda", status="oom", expect=[oom_recorded],
          cpu_skip="no GPU memory to exhaust (on a CPU it would exhaust host memory)"),
    Check("llm-lora", "llm", {"method": "lora", "profiler": "torch"},
          "LoRA single-device recipe, torchtune's profiler and peak memory",
          expect=[torchtune_memory, gpu_memory, window_recorded, profiled("cudaLaunchKernel"),
                  learns]),
    Check("llm-qlora", "llm", {"method": "qlora"}, "QLoRA (NF4 base) single-device recipe",
          expect=[torchtune_memory, gpu_memory, learns]),
    Check("llm-dpo", "llm", {"method": "dpo", "profiler": "torch"},
          "LoRA DPO single-device recipe with our profiler extension",
          expect=[torchtune_memory, window_recorded, profiled("cudaLaunchKernel"), learns]),
    Check("llm-lora-distributed-1rank", "llm", {"method": "lora", "recipe": "distributed"},
          "lora_finetune_distributed (FSDP2) under torchrun at 1 rank",
          expect=[torchtune_memory, gpu_memory, learns]),
    Check("llm-dpo-distributed", "llm", {"method": "dpo", "recipe": "distributed",
                                         "gpus": UP_TO_2},
          "lora_dpo_distributed under torchrun (1 rank on a one-GPU node)",
          expect=[torchtune_memory, learns]),
    Check("llm-qat-distributed", "llm", {"method": "qat", "recipe": "distributed",
                                         "gpus": UP_TO_2, "lr": 1e-3},
          "qat_distributed (fake-quantised full fine-tune) under torchrun (1 rank on a one-GPU "
          "node)", expect=[torchtune_memory, gpu_memory, learns]),
    # The 8B shape: 24 steps of the synthetic alpaca set's 600, enough for a steady s/it beside
    # the paper's 0.77 (Table 5), under torch.profiler; no learning asked of random weights.
    Check("llm-llama3-8b-lora", "llm",
          {"model": "llama3_8b", "weights": "random", "tokenizer": "bytes",
           "data_source": "synthetic", "dataset": "alpaca", "method": "lora", "max_steps": 24,
           "epochs": 1, "shuffle": True, "warmup_steps": 1, "lr": 3e-4,
           "profiler": "torch"},
          "Llama3-8B shape, random weights made on the GPU, LoRA fp32 batch 2, profiled",
          needs="cuda", expect=[torchtune_memory, min_peak_gib(30.0), window_recorded,
                                profiled("cudaLaunchKernel")],
          cpu_skip="Llama3-8B needs a GPU (30 GiB of fp32 weights)"),
    Check("multi-vision-ddp-allreduce", "vision",
          {"strategy": "ddp_ds", "profiler": "torch", "gpus": 2},
          "DDP gradient all-reduce across 2 ranks (NCCL on GPUs, gloo on a CPU)",
          needs="multi", expect=[nccl_or_gloo("gloo:all_reduce")]),
    Check("multi-llm-fsdp-allgather", "llm",
          {"method": "lora", "profiler": "torch", "gpus": 2},
          "FSDP all-gather across 2 ranks in lora_finetune_distributed",
          needs="multi", expect=[torchtune_memory, nccl_or_gloo("gloo:all_gather"), learns]),
]  # fmt: skip


def spec_of(check: Check, ranks: int, cuda: bool = True) -> dict[str, Any]:
    """The check's run spec on `ranks` ranks; on a CPU (cuda False) with its cpu_spec keys."""
    base = VISION if check.workload == "vision" else LLM
    spec = {**base, **check.spec, **({} if cuda else check.cpu_spec)}
    if spec["gpus"] == UP_TO_2:
        spec["gpus"] = min(2, ranks)
    if check.workload == "llm":  # a vision check keeps its strategy at 1 rank: no canonical()
        spec = llm_spec.canonical(spec)
    WORKLOADS[check.workload].validate(spec)
    return spec


def skip_reason(check: Check, cuda: bool, ranks: int) -> str | None:
    if check.needs == "cuda" and not cuda:
        return check.cpu_skip or "needs a CUDA GPU"
    if check.needs == "multi" and ranks < 2:
        unit = "GPUs" if cuda else "CPU cores for gloo ranks"
        return f"needs 2 ranks, this machine has {ranks} {unit}"
    return None
