"""The cost model: the predicted wall time of one launch of a run spec, before it runs.

Published numbers are read from reference/paper/*.csv, never retyped here; every
other factor is a named constant below with where it comes from. Estimates are for one launch
(start-up included, what the sweep records as `launch_wall_s`), plus the trace export/parse after
a profiled run (`post_s`, outside the launch).

Vision on GPUs is anchored on Tables 2 and 3 (ANCHOR_VISION: matrix V3 `paper`): seconds per
image per rank at g GPUs, scaled by pixels, width, pinning and the options, never faster than a
launch-bound step floor (`_vision_gpu_loop`). LLM on GPUs is anchored on Table 5's LoRA s/it,
scaled by method and tokens per row (`llm_s_per_it`); start-up and model load per launch
(`_loop_and_steps`).

The optimisations of issue 20 (O1-O4), the CPU machines' crude model (gloo ranks, the smoke
scale) and a workload this model does not know are priced by the constants below, each with its
source. A cell this machine cannot run (its workload's unsupported_reason) costs nothing.

Local calibration: once runs exist, `plan.calibration()` takes per workload the median over this
scale's finished ok runs made on the same kind of machine of `launch_wall_s / estimate_s(spec)`,
and every estimate of that workload is multiplied by it (1.0 where no run exists).
"""

from __future__ import annotations

import csv
import functools
import math
from typing import Any

from run import store
from run.llm import spec as llm_spec
from run.node import busy, profiling
from run.sweep.workloads import WORKLOADS
from run.vision import spec as vision_spec

# --- the paper's published times, read from reference/paper/*.csv (never retyped) --------------
PAPER_GPU = "H100"  # the paper's node: 4 x NVIDIA H100-94 SXM5 (EXPERIMENTS.md)
# Table 4 names a template per parent set; template_subsets.csv spells two of them differently.
TEMPLATE_ALIASES = {"Summarize": "Summary", "Grammar Error Correction": "Error Correction"}
# (file, key, column) of the anchors: Table 2 total seconds by (gpus, precision), Table 3 total
# seconds and Table 5 LoRA s/it by (gpus, pin_memory)
TABLE2 = ("table2_precision.csv", "precision", "total_time_s")
TABLE3 = ("table3_pin_memory_vision.csv", "pin_memory", "total_time_s")
TABLE5 = ("table5_pin_memory_llm.csv", "pin_memory", "iteration_time_s_per_it")


def _read_csv(name: str) -> list[dict[str, str]]:
    with open(store.REFERENCE_DIR / name) as fh:
        return list(csv.DictReader(fh))


@functools.cache
def paper_table(name: str, key: str, column: str) -> dict[tuple[int, Any], float]:
    """A paper table by (gpus, key): precision lower-case, pin_memory as a bool."""
    cast = str.lower if key == "precision" else (lambda v: v == "true")
    return {(int(r["gpus"]), cast(r[key])): float(r[column]) for r in _read_csv(name)}


def paper_node_gpus() -> int:
    """The paper's node, which a plan for a GPU scale assumes on a machine without GPUs: the
    largest GPU count of Table 2 (4)."""
    return max(g for g, _ in paper_table(*TABLE2))


@functools.cache
def tokens_per_row() -> dict[str, float]:
    """Llama3 tokens per row for every data set of llm_spec.DATASETS, from the paper's CSVs."""
    per_template = {
        r["template"]: float(r["tokens"]) / float(r["rows"])
        for r in _read_csv("template_subsets.csv")
    }
    from run.llm.catalog import TEMPLATE_LABELS

    out = {d: per_template[t] for d, t in TEMPLATE_LABELS.items()}
    by_name = {r["dataset"]: r["template"] for r in _read_csv("table4_llm_datasets.csv")}
    for ours, theirs in llm_spec.PAPER_DATASET_NAMES.items():
        template = by_name[theirs]
        out[ours] = per_template[TEMPLATE_ALIASES.get(template, template)]
    return out


# --- vision on GPUs: the setup of the Table 2/3 anchor runs ---------------------------------------
# EXPERIMENTS.md: 60k/10k MNIST, 20 epochs, DDP-DS, pin_memory off; the image size (500 px) and
# batch (64) are the artifact's assumptions for Table 2, as matrix V3 `paper` holds them (a test
# checks that these equal that spec).
ANCHOR_VISION = {
    "train_images": 60_000,
    "test_images": 10_000,
    "epochs": 20,
    "image_size": 500,
    "batch_size": 64,
}
# Evaluation is a forward pass only: about a third of a training step's work (backward is about
# twice the forward). Assumption (the usual 1:2 forward:backward rule).
EVAL_COST_SHARE = 1 / 3
# Share of a 1-GPU training step spent producing and copying the batch (CPU transforms, HtoD),
# which DDP-RR pays for every batch on every rank. Assumption: at least the 23 % that pinning
# removes at 1 GPU in Table 3; we take half.
VISION_LOAD_SHARE = 0.5
# A step cannot be faster than this however small the images: an eager MobileNetV2 step launches
# ~450 kernels (forward, backward, Adam) and hands over a DataLoader batch. Assumption, chosen so
# that 100 px is launch-bound (1.6x its pixel share at 1 GPU), as V2a/V5a say the paper saw.
VISION_STEP_FLOOR_S = 0.012
# Per launch: torchrun, CUDA/NCCL init of each rank, MNIST read, DataLoader workers, model build,
# exit. Assumption (not published; local calibration corrects it).
VISION_STARTUP_S = 10.0

# --- LLM on GPUs ---------------------------------------------------------------------------------
# Share of the anchor's 0.77 s/it that grows with tokens per row. Assumption: a LoRA step on 2
# rows of ~120 tokens is ~8 TFLOP (2 x 8e9 params x 2 passes x 2 flop x 240 tokens); at ~40
# TFLOP/s fp32 on an H100 that is ~0.2 s; the rest is per step (weights streamed, kernel
# launches, optimizer, logging), as L3a says launch and synchronisation dominate.
LLM_TOKEN_SHARE = 0.3
# The byte tokenizer makes sequences about 4x longer than Llama3's BPE (run/llm/spec.py).
BYTES_PER_TOKEN = 4.0
# s/it relative to LoRA. The CSVs hold no s/it per method: these are assumptions ordered as J
# Fig.13 (L5a-c: LoRA fastest, QLoRA and QAT slowest, QAT slower than DPO). DPO: L6b says LoRA is
# 30-40 % faster than DPO, i.e. DPO takes 1.4-1.7x: 1.5. QLoRA dequantises NF4 weights in every
# matmul: 2.0. QAT trains all 8B weights with fake quantisation and FSDP gathers: 2.2.
METHOD_FACTOR = {"lora": 1.0, "dpo": 1.5, "qlora": 2.0, "qat": 2.2}
# Per launch: Python and torchtune imports, tokenizer, data set from the cache, exit; torchrun,
# NCCL init and teardown when distributed. Assumptions.
LLM_STARTUP_S = 10.0
LLM_DIST_STARTUP_S = 5.0
# Llama3-8B in fp32 (32 GB). Random weights (the default without LLAMA3_DIR) are drawn on each
# rank's GPU (run/llm/weights.py): seconds, after the model is built on the device; one device
# holds the whole model (more to build and copy into), FSDP ranks a shard. A real checkpoint is
# read from disk (16 GB bf16) and cast, which takes longer; local calibration corrects both.
# Assumptions.
LLM_MODEL_LOAD_S = 20.0
LLM_MODEL_LOAD_DIST_S = 8.0
# QLoRA quantises the 8B base weights to NF4 while loading. Assumption.
QLORA_QUANTIZE_S = 10.0
# L8d: the paper's QAT ran out of memory on fewer than 4 GPUs (H100 94 GB); such a run is
# estimated as start-up, load and one step. Assumption that it does so here too.
QAT_FITS_GPUS = 4
# The tiny llama3 (smoke) on a GPU: seconds per step. Assumption.
TINY_GPU_S_PER_IT = 0.03

# --- the optimisations of issue 20 (O1-O4), on GPUs --------------------------------------------
# Nothing published: assumptions, to be corrected by local calibration and `make bench-optimize`.
# upsample=device copies 784 uint8 bytes per image instead of a 3 x px^2 float32 tensor and drops
# the per-image CPU resize: costed as pinning's gain in Table 3 (the copy made cheaper), which is
# a lower bound, since the bytes fall by hundreds of times.
# channels_last and fused Adam: a few per cent on MobileNetV2's step (assumptions).
CHANNELS_LAST_FACTOR = 0.95
FUSED_FACTOR = 0.97
# torch.compile: inductor's kernels (fewer launches, fused element-wise ops) run the step this much
# faster and lower the launch-bound floor; compiling costs start-up time on every launch (no cache
# is kept between runs). Assumptions: MobileNetV2 forward and backward compile in about a minute;
# torchtune compiles one Llama3 layer and reuses it for the other 31, plus the loss.
COMPILE_FACTOR = 0.8
COMPILE_FLOOR_FACTOR = 0.5
VISION_COMPILE_S = 60.0
LLM_COMPILE_FACTOR = 0.85
LLM_COMPILE_S = 60.0
# host_sync=epoch: no per-step .item() wait, so the host queues the next step's kernels while the
# GPU runs this one: lowers the launch-bound floor (assumption).
HOST_SYNC_FLOOR_FACTOR = 0.9
# dataset.packed: torchtune's PackedDataset tokenises and packs every row before the first step
# (assumption: 2,000 rows/s), then every sequence is max_seq_len tokens long (priced as tokens).
PACK_S_PER_ROW = 0.0005

# --- profilers (both workloads) ------------------------------------------------------------------
# Slowdown of the profiled window. Assumptions: nsys traces CUDA API and kernels without CPU
# sampling; torch.profiler records every op with its CUDA kernels (`make bench-profiler` measures
# both on this machine).
PROFILER_SLOWDOWN = {"none": 1.0, "nsys": 1.10, "torch": 1.5}
# After the launch, per rank: nsys export to SQLite (fixed + per traced second) and reading it;
# torch.profiler traces written and parsed per recorded step. Assumptions.
NSYS_EXPORT_S = 10.0
NSYS_EXPORT_S_PER_TRACED_S = 0.1
TORCH_TRACE_S_PER_STEP = {"vision": 0.05, "llm": 1.0}
# On a CPU the traces hold no CUDA kernels and the smoke models are tiny. Assumption.
CPU_TORCH_TRACE_S_PER_STEP = 0.05

# --- a workload this model does not know yet (README, "Adding a workload") --------------------
# Its planned steps at a flat rate, on any machine, until its own model is written here: a plan
# that is honest about knowing nothing (assumptions; local calibration then corrects the rate).
OTHER_STARTUP_S = 10.0
OTHER_S_PER_STEP = 1.0

# --- CPU machines (gloo ranks): a crude model fitted to the smoke `make all` on 2 cores --------
# Fitted (least squares, tests/test_plan.py) to the launches of a fresh clone's smoke `make all`
# at one compute thread per rank (issue 26; a3f565e on a Xeon with AMX-BF16): 58 vision launches
# took 544 s (start-up 4.6 s each, the per-image cost, bf16/fp16 at 1.9x fp32 and 27 s of
# compiling), 51 LLM launches 287 s (start-up 5.1 s, 0.044 s a step); median error per run 23 %.
CPU_VISION_STARTUP_S = 4.6
# seconds per training image at 32 px, fp32, on one thread
CPU_VISION_S_PER_IMAGE_32PX = 0.0078
# bf16 autocast (FP16 on CPU) 1.9x FP32 on this CPU (AMX-BF16; fitted); FP64 about 2x (assumption).
CPU_PRECISION_FACTOR = {"fp32": 1.0, "fp64": 2.0, "fp16": 1.9, "bf16": 1.9}
CPU_LLM_STARTUP_S = 5.1
# seconds per step of the tiny llama3 on alpaca-like rows, one thread per rank
CPU_LLM_S_PER_IT = 0.044
# Llama3-8B on a CPU (never planned by the matrix: quick and paper need GPUs). Assumption.
CPU_8B_S_PER_IT = 120.0
# torch.compile with inductor's C++ backend, per launch (every rank compiles at once). Measured on
# the 2-core machine, one thread, other jobs running: MobileNetV2 x0.25 at 64 px, bf16 autocast,
# channels_last, the first step 48 s, the next ones 0.03 s; the tiny llama3's compiled LoRA run
# launched in 10 s against 6 s eager (`make bench-optimize`). The compiled step's own speed-up is
# not modelled on a CPU (the estimate stays on the safe side).
CPU_VISION_COMPILE_S = 27.0
CPU_LLM_COMPILE_S = 5.0


def on_gpu(info: dict[str, Any]) -> bool:
    return bool(info.get("gpu_count"))


def _cores(info: dict[str, Any]) -> int:
    """CPU cores this process may use (what run.node.probe.max_ranks gives on a CPU machine)."""
    return int(info.get("affinity_cpus") or info.get("cpu_count") or 1)


def _t2(g: int, prec: str) -> float:
    """Table 2 seconds at g GPUs; beyond the table the largest count's efficiency is kept."""
    top = paper_node_gpus()
    if g <= top:
        return paper_table(*TABLE2)[(g, prec)]
    return paper_table(*TABLE2)[(top, prec)] * top / g


def _capped(table: dict[tuple[int, Any], float], g: int, key: Any) -> float:
    """A Table 3 or 5 value; beyond the table the largest GPU count's."""
    return table[(min(g, max(k for k, _ in table)), key)]


def _vision_units(spec: dict[str, Any]) -> tuple[float, int]:
    """(training images per rank plus evaluation's share over the run, eval batches per epoch);
    evaluation is sharded for every strategy."""
    n, g = spec["train_images"], spec["gpus"]
    if spec["strategy"] == "ddp_ds" or g == 1:
        images = math.ceil(n / g)
    elif spec["strategy"] == "ddp":
        images = n
    else:
        images = n * (VISION_LOAD_SHARE + (1 - VISION_LOAD_SHARE) / g)
    per_rank = math.ceil(spec["test_images"] / g)
    units = spec["epochs"] * (images + EVAL_COST_SHARE * per_rank)
    return units, math.ceil(per_rank / spec["batch_size"])


def _vision_width(spec: dict[str, Any]) -> float:
    """Convolution work scales with channels in x channels out: MobileNetV2's width_mult squared.
    Crude at small widths, where per-op overhead dominates: the 10 smoke runs of V3/V4/V7 (width
    0.25, 64 px) plan 293 s and measured 347-364 s on 2 cores."""
    return spec.get("width_mult", 1.0) ** 2


def _vision_gpu_loop(spec: dict[str, Any]) -> float:
    g, prec = spec["gpus"], spec["precision"]
    prec = "fp16" if prec == "bf16" else prec  # bf16 autocast costed as FP16 mixed (assumption)
    a = ANCHOR_VISION
    anchor_units = a["epochs"] * (
        math.ceil(a["train_images"] / g) + EVAL_COST_SHARE * math.ceil(a["test_images"] / g)
    )
    unit = _t2(g, prec) / anchor_units
    units, eval_batches = _vision_units(spec)
    pixels = (spec["image_size"] / a["image_size"]) ** 2 * _vision_width(spec)
    # device upsampling makes the copy cheaper as pinning does; both at once count once
    cheap_copy = spec["pin_memory"] or spec.get("upsample") == "device"
    pin = (
        _capped(paper_table(*TABLE3), g, True) / _capped(paper_table(*TABLE3), g, False)
        if cheap_copy
        else 1.0
    )
    compute = units * unit * pixels * pin * _vision_opt_factor(spec)
    ineff = g * _t2(g, "fp32") / _t2(1, "fp32")  # the floor grows by the paper's efficiency loss
    steps = vision_spec.planned_steps(spec) + spec["epochs"] * EVAL_COST_SHARE * eval_batches
    floor = VISION_STEP_FLOOR_S * (COMPILE_FLOOR_FACTOR if spec.get("compile") else 1.0)
    floor *= HOST_SYNC_FLOOR_FACTOR if spec.get("host_sync") == "epoch" else 1.0
    return max(compute, steps * floor * ineff)


def _vision_opt_factor(spec: dict[str, Any]) -> float:
    """Step time of the issue-20 options relative to the eager, NCHW, unfused loop (GPU)."""
    f = CHANNELS_LAST_FACTOR if spec.get("channels_last") else 1.0
    f *= FUSED_FACTOR if spec.get("fused_optimizer") else 1.0
    return f * (COMPILE_FACTOR if spec.get("compile") else 1.0)


def _vision_cpu_loop(spec: dict[str, Any], info: dict[str, Any]) -> float:
    g = spec["gpus"]
    cores = _cores(info)
    threads = 1  # one compute thread per rank (run/node/threads.py)
    units, _ = _vision_units(spec)
    pixels = (spec["image_size"] / 32) ** 2 * _vision_width(spec)
    per_thread = units * pixels * CPU_PRECISION_FACTOR[spec["precision"]]
    # a run beside a busy core (run/node/busy.py) shares the cores with its burner too
    oversubscribed = max(1.0, (g + busy.busy_cores(spec, g, cores)) / cores)
    return per_thread * CPU_VISION_S_PER_IMAGE_32PX / threads * oversubscribed


def _token_factor(spec: dict[str, Any], relative_tokenizer: bool) -> float:
    """s/it relative to the anchor's alpaca rows: (1 - LLM_TOKEN_SHARE) + LLM_TOKEN_SHARE * tokens
    per row / alpaca's (a parent set takes its template's tokens per row)."""
    tpr = tokens_per_row()
    tok = tpr[spec["dataset"]]
    anchor = tpr["alpaca"]
    if llm_spec.resolve_tokenizer(spec) == "bytes":
        tok *= BYTES_PER_TOKEN
        if relative_tokenizer:  # the anchor ran with the same tokenizer (CPU model)
            anchor *= BYTES_PER_TOKEN
    cap = spec.get("max_seq_len") or llm_spec.DEFAULT_MAX_SEQ_LEN[spec["model"]]
    # a packed row is max_seq_len tokens long whatever the rows it holds
    tok = cap if spec.get("packed") else min(tok, cap)
    return (1 - LLM_TOKEN_SHARE) + LLM_TOKEN_SHARE * tok / anchor


def llm_s_per_it(spec: dict[str, Any], info: dict[str, Any]) -> float:
    """Estimated seconds per optimizer step of an LLM spec on this kind of machine."""
    method = METHOD_FACTOR[spec["method"]]
    g = spec["gpus"]
    if on_gpu(info):
        if spec["model"] == "tiny":
            return TINY_GPU_S_PER_IT * method
        compiled = LLM_COMPILE_FACTOR if spec.get("compile") else 1.0
        s5 = _capped(paper_table(*TABLE5), g, spec["pin_memory"])
        return s5 * method * _token_factor(spec, relative_tokenizer=False) * compiled
    cores = _cores(info)
    base = CPU_LLM_S_PER_IT if spec["model"] == "tiny" else CPU_8B_S_PER_IT
    load = g + busy.busy_cores(spec, g, cores)  # ranks, and a busy run's burners (run/node/busy.py)
    return base * method * _token_factor(spec, relative_tokenizer=True) * max(1.0, load / cores)


def expect_oom(spec: dict[str, Any], info: dict[str, Any]) -> bool:
    """QAT of Llama3-8B below QAT_FITS_GPUS GPUs: out of memory in the paper (L8d)."""
    return (
        spec["workload"] == "llm"
        and on_gpu(info)
        and spec["model"] != "tiny"
        and spec["method"] == "qat"
        and spec["gpus"] < QAT_FITS_GPUS
    )


def _window(spec: dict[str, Any], steps: int, window: dict[str, Any] | None) -> dict[str, Any]:
    w = window if window is not None else profiling.DEFAULT_WINDOW
    fitted, _ = profiling.fit_window(w, max(steps, 1), spec["profiler"])
    return fitted


def _profiled(
    spec: dict[str, Any], loop_s: float, steps: int, window: dict[str, Any] | None
) -> tuple[float, float]:
    """(loop seconds with the profiler's slowdown, seconds traced)."""
    prof = spec.get("profiler", "none")
    if prof not in ("nsys", "torch") or loop_s <= 0:
        return loop_s, 0.0
    w = _window(spec, steps, window)
    if spec["workload"] == "llm" and prof == "nsys":
        traced = min(loop_s, w["max_seconds"] or loop_s)  # --duration from the start
    else:
        traced = loop_s * min(1.0, (w["warmup_steps"] + w["active_steps"]) / max(steps, 1))
        if w["max_seconds"]:
            traced = min(traced, w["max_seconds"])
    return loop_s + traced * (PROFILER_SLOWDOWN[prof] - 1), traced


def _loop_and_steps(spec: dict[str, Any], info: dict[str, Any]) -> tuple[float, int, float]:
    """(loop seconds without profiler, steps, start-up seconds)."""
    gpu = on_gpu(info)
    if spec["workload"] not in ("vision", "llm"):
        steps = WORKLOADS[spec["workload"]].planned_steps(spec)
        return steps * OTHER_S_PER_STEP, steps, OTHER_STARTUP_S
    if spec["workload"] == "vision":
        steps = vision_spec.planned_steps(spec)
        compile_s = (VISION_COMPILE_S if gpu else CPU_VISION_COMPILE_S) if spec["compile"] else 0.0
        if gpu:
            return _vision_gpu_loop(spec), steps, VISION_STARTUP_S + compile_s
        return _vision_cpu_loop(spec, info), steps, CPU_VISION_STARTUP_S + compile_s
    steps = llm_spec.planned_steps(spec)
    steps = min(steps, 1) if expect_oom(spec, info) else steps
    loop = steps * llm_s_per_it(spec, info)
    extra = (LLM_COMPILE_S if gpu else CPU_LLM_COMPILE_S) if spec.get("compile") else 0.0
    extra += PACK_S_PER_ROW * llm_spec.dataset_rows(spec) if spec.get("packed") else 0.0
    if not gpu:
        return loop, steps, CPU_LLM_STARTUP_S + extra
    start = LLM_STARTUP_S + extra + (LLM_DIST_STARTUP_S if llm_spec.distributed(spec) else 0.0)
    if spec["model"] != "tiny":
        start += LLM_MODEL_LOAD_DIST_S if llm_spec.distributed(spec) else LLM_MODEL_LOAD_S
        start += QLORA_QUANTIZE_S if spec["method"] == "qlora" else 0.0
    return loop, steps, start


def estimate_s(
    spec: dict[str, Any], info: dict[str, Any], window: dict[str, Any] | None = None
) -> float:
    """Predicted wall seconds of one launch (start-up included) on the machine `info` describes,
    before local calibration; 0 for an unsupported cell. `window`: the scale's profiling window
    (DEFAULT_WINDOW when not given)."""
    if WORKLOADS[spec["workload"]].unsupported_reason(spec):
        return 0.0
    loop, steps, start = _loop_and_steps(spec, info)
    loop, _ = _profiled(spec, loop, steps, window)
    return start + loop


def post_s(
    spec: dict[str, Any], info: dict[str, Any], window: dict[str, Any] | None = None
) -> float:
    """Seconds after the launch: nsys export or torch trace parsing into profile_metrics.csv."""
    prof = spec.get("profiler", "none")
    if prof not in ("nsys", "torch") or WORKLOADS[spec["workload"]].unsupported_reason(spec):
        return 0.0
    loop, steps, _ = _loop_and_steps(spec, info)
    _, traced = _profiled(spec, loop, steps, window)
    ranks = spec["gpus"]
    if prof == "nsys":
        return ranks * (NSYS_EXPORT_S + NSYS_EXPORT_S_PER_TRACED_S * traced)
    w = _window(spec, steps, window)
    per_step = (
        TORCH_TRACE_S_PER_STEP.get(spec["workload"], OTHER_S_PER_STEP)
        if on_gpu(info)
        else CPU_TORCH_TRACE_S_PER_STEP
    )
    return ranks * w["active_steps"] * per_step
