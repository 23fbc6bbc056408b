"""The metric logger torchtune's recipes instantiate from the config's `metric_logger:` block.

Each optimizer step (rank 0 only in the distributed recipes) logs the loss, lr,
tokens_per_second_per_gpu and, on CUDA, the peak memory in GiB within the step; we add the wall
time since the previous call (the step time, data loading included; the first step counts from
`train()`'s start), the time spent in the profiler's step() since the previous call (recipes.py
times it: the trace export at a window's close, 14.7 s of one 0.58 s step of Llama3-8B on an
H200) and the peak host RSS, and append it to steps.jsonl. No console text is parsed.
"""

from __future__ import annotations

import math
import resource
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from run.store import STEPS, append_jsonl

GIB = 1024**3
CUDA_PEAKS = ("peak_memory_active", "peak_memory_alloc", "peak_memory_reserved")
# every run's summary has these (None where a run had no steps or the records lack them)
SUMMARY_NUMBERS = (
    "s_per_it tokens_per_s tokens_per_s_per_gpu first_loss final_loss losses_finite "
    "loss_window_steps head_loss tail_loss tokens_trained"
).split()


def host_peak_rss_bytes() -> int:
    """Peak resident set size of this process (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _scalar(value: Any) -> Any:
    if hasattr(value, "item"):  # torch or numpy scalar
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # keep steps.jsonl valid JSON; the summary flags it
    return value


def timing_warmup(warmup_steps: int, steps: int) -> int:
    """Leading steps the mean step time leaves out: the spec's warm-up (100 in the paper) but at
    most a quarter of the steps, so short runs (63 steps of a 500-row subset on 4 GPUs; 8 in
    smoke) still average over most of their steps."""
    return max(0, min(warmup_steps, steps // 4))


def summarize(records: list[dict[str, Any]], warmup_steps: int, world_size: int) -> dict[str, Any]:
    """The summary numbers of a run from its per-step records."""
    steps = len(records)
    out: dict[str, Any] = {"steps": steps, "warmup_steps_excluded": 0}
    out.update(dict.fromkeys(SUMMARY_NUMBERS))
    if not steps:
        return out
    excluded = timing_warmup(warmup_steps, steps)
    timed = records[excluded:]
    # a training step's time, not the profiler's: the export would count as training otherwise
    profiler_s = sum(r.get("profiler_s") or 0.0 for r in timed)
    seconds = sum(r["time_s"] for r in timed) - profiler_s
    out["warmup_steps_excluded"] = excluded
    out["profiler_s_excluded"] = profiler_s
    out["s_per_it"] = seconds / len(timed)
    tps = [r.get("tokens_per_second_per_gpu") for r in timed]
    if all(isinstance(v, (int, float)) for v in tps) and seconds > 0:
        per_gpu = sum(v * r["time_s"] for v, r in zip(tps, timed, strict=True)) / seconds
        out["tokens_per_s_per_gpu"] = per_gpu
        out["tokens_per_s"] = per_gpu * world_size
    losses = [r.get("loss") for r in records]
    out["first_loss"] = losses[0]
    out["final_loss"] = losses[-1]
    out["losses_finite"] = all(isinstance(v, (int, float)) and math.isfinite(v) for v in losses)
    if out["losses_finite"]:
        # "Loss after N steps": one step's loss is the mean over one batch (2 rows in the paper)
        # and jumps from batch to batch, so the mean of the last quarter of the steps stands for
        # it, and the first quarter's mean beside it says whether the loss fell.
        k = max(1, steps // 4)
        out["loss_window_steps"] = k
        out["head_loss"] = sum(losses[:k]) / k
        out["tail_loss"] = sum(losses[-k:]) / k
    counts = [r.get("tokens") for r in records]
    if all(isinstance(v, int) for v in counts):
        # packing changes the tokens a step carries: the loss after N steps is read beside this
        out["tokens_trained"] = sum(counts)
    for key in CUDA_PEAKS:
        values = [r[key] for r in records if isinstance(r.get(key), (int, float))]
        if values:
            # each reading is the peak within its step (torchtune resets the counters after
            # reading them): the maximum over steps, and the last step's, which the paper read
            out[f"{key}_bytes"] = int(max(values) * GIB)
            out[f"{key}_last_bytes"] = int(values[-1] * GIB)
    return out


class RunMetricLogger:
    """torchtune's MetricLoggerInterface writing run_dir/steps.jsonl; world_size: ranks of the
    run (tokens_per_second_per_gpu * world_size = tokens/s)."""

    def __init__(self, run_dir: str, warmup_steps: int = 0, world_size: int = 1, **_: Any):
        self.run_dir = Path(run_dir)
        self.warmup_steps = int(warmup_steps)
        self.world_size = int(world_size)
        self.records: list[dict[str, Any]] = []
        self._t_start: float | None = None
        self._t_last: float | None = None
        self.train_time_s: float | None = None
        self._t_return: float | None = None
        self._profiler_s = 0.0  # since the last step's record

    # called by our recipe extension around train(), and around each profiler step
    def profiler_time(self, seconds: float) -> None:
        self._profiler_s += seconds

    @property
    def profiler_total_s(self) -> float:
        """Every profiler step so far: the records' and those after the last record."""
        return sum(r["profiler_s"] for r in self.records) + self._profiler_s

    def start(self) -> None:
        self._t_start = self._t_last = self._t_return = time.perf_counter()

    def stop(self) -> None:
        if self._t_start is not None:  # the profiler's trace writing is not training
            self.train_time_s = time.perf_counter() - self._t_start - self.profiler_total_s

    # MetricLoggerInterface
    def log(self, name: str, data: Any, step: int) -> None:
        self.log_dict({name: data}, step)

    def log_config(self, config: Any) -> None:
        """The config is saved by run/llm/tune.py before the recipe starts; nothing to add."""

    def log_dict(self, payload: Mapping[str, Any], step: int) -> None:
        now = time.perf_counter()
        if self._t_start is None:
            self.start()
        record = {
            "step": int(step),
            "time_s": now - self._t_last,
            "elapsed_s": now - self._t_start,
            "profiler_s": self._profiler_s,
        }
        self._profiler_s = 0.0
        record.update({key: _scalar(value) for key, value in payload.items()})
        tps = record.get("tokens_per_second_per_gpu")
        if isinstance(tps, (int, float)):
            # The recipe logs a rate: tokens of the step (summed over ranks) / (its step time x
            # ranks); its step clock restarts as this call returns, so the time since our last
            # return is that step time within microseconds, and the product the step's tokens
            # (the first step's also spans the recipe's few lines before its loop).
            record["tokens"] = round(tps * (now - self._t_return) * self.world_size)
        record["host_peak_rss_bytes"] = host_peak_rss_bytes()
        self._t_last = now
        self.records.append(record)
        append_jsonl(self.run_dir / STEPS, record)
        self._t_return = time.perf_counter()

    def close(self) -> None:
        """Nothing buffered: every step is on disk when log_dict returns."""

    def summary(self) -> dict[str, Any]:
        return {**summarize(self.records, self.warmup_steps, self.world_size),
                "profiler_s": self.profiler_total_s}  # fmt: skip
