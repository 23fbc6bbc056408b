"""Profiling inside a rank's loop: the no-op twin, torch.profiler and the nsys capture range,
each counting steps against the window of run/node/profiling.py.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

from run.node import profiling


class NoProfiler(contextlib.nullcontext):
    seconds = 0.0  # the profiler's own time inside the run (TorchProfiler)

    def step(self) -> None:
        return None


class _Windowed:
    def __init__(self, window: dict[str, Any]) -> None:
        self.window = window
        self.steps = 0
        self.t_open: float | None = None
        self.closed = False
        # Time torch.profiler spends in the run processing and writing its trace as the window
        # closes (a check of 0.62 s ran 1.75 s profiled on an H200): the run's times leave it out,
        # as nsys writes its report after the run. nsys's own steps add nothing here.
        self.seconds = 0.0

    def _past_time_limit(self) -> bool:
        limit = self.window["max_seconds"]
        return bool(limit) and self.t_open is not None and time.monotonic() - self.t_open > limit

    def _past_steps(self) -> bool:
        w = self.window
        last = w["wait_steps"] + w["warmup_steps"] + w["active_steps"]
        return bool(w["active_steps"]) and self.steps >= last


class TorchProfiler(_Windowed):
    def __init__(self, window: dict[str, Any], trace_file: Path, cuda: bool) -> None:
        super().__init__(window)
        import torch.profiler as tp

        self.trace_file = trace_file
        self.stopped = False
        self.cuda = cuda
        activities = [tp.ProfilerActivity.CPU] + ([tp.ProfilerActivity.CUDA] if cuda else [])
        # 0 (until the end) only reaches here for a run started by hand: Kineto's cap applies
        active = self.active = window["active_steps"] or window["torch_max_active_steps"]
        self.prof = tp.profile(
            activities=activities,
            schedule=tp.schedule(
                wait=window["wait_steps"], warmup=window["warmup_steps"], active=active, repeat=1
            ),
            on_trace_ready=self._export,
            record_shapes=False,
            with_stack=False,
        )

    def _export(self, prof: Any) -> None:
        self.trace_file.parent.mkdir(parents=True, exist_ok=True)
        prof.export_chrome_trace(str(self.trace_file))  # .gz suffix: written gzipped
        self.closed = True  # repeat=1: one window per run

    def __enter__(self) -> TorchProfiler:
        self.prof.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if not self.stopped:
            self._timed(self.prof.__exit__, *exc)  # a window still open is recorded up to here

    def _timed(self, call: Any, *args: Any) -> None:
        """A call that processes and writes the trace, timed after the device's queued work."""
        if self.cuda:
            import torch

            torch.cuda.synchronize()
        t0 = time.monotonic()
        try:
            call(*args)
        finally:
            self.seconds += time.monotonic() - t0

    def step(self) -> None:
        if self.closed:
            return
        self.steps += 1
        w = self.window
        if self.t_open is None and self.steps >= w["wait_steps"] + w["warmup_steps"]:
            self.t_open = time.monotonic()
        if self._past_time_limit():
            self._timed(self.prof.stop)  # records the window so far and exports it
            self.stopped = self.closed = True
        elif self.steps == w["wait_steps"] + w["warmup_steps"] + self.active:
            self._timed(self.prof.step)  # the schedule's last active step: the export
        else:
            self.prof.step()


class NsysProfiler(_Windowed):
    """Opens and closes nsys's capture range (cudaProfilerApi) around the window's steps, each
    step an NVTX range; warm-up steps are not captured."""

    def __init__(self, window: dict[str, Any]) -> None:
        super().__init__(window)
        import torch

        self.cuda = torch.cuda
        self.in_range = False

    def __enter__(self) -> NsysProfiler:
        if self.window["wait_steps"] + self.window["warmup_steps"] == 0:
            self._open()
        return self

    def _open(self) -> None:
        self.cuda.synchronize()
        self.cuda.profiler.start()
        self.t_open = time.monotonic()
        self.cuda.nvtx.range_push(f"step {self.steps}")
        self.in_range = True

    def _close(self) -> None:
        if self.in_range:
            self.cuda.nvtx.range_pop()
            self.in_range = False
        self.cuda.synchronize()
        self.cuda.profiler.stop()
        self.closed = True

    def __exit__(self, *exc: object) -> None:
        if self.t_open is not None and not self.closed:
            self._close()

    def step(self) -> None:
        if self.closed:
            return
        self.steps += 1
        w = self.window
        if self.t_open is None:
            if self.steps >= w["wait_steps"] + w["warmup_steps"]:
                self._open()
            return
        if self._past_steps() or self._past_time_limit():
            self._close()
            return
        self.cuda.nvtx.range_pop()
        self.cuda.nvtx.range_push(f"step {self.steps}")


def profiler_for(
    spec: dict[str, Any], run_dir: Path, rank: int, steps: int | None = None
) -> NoProfiler | TorchProfiler | NsysProfiler:
    """The profiler a rank uses, its RUN/profiling.json window fitted to `steps` (rank 0
    records the fit)."""
    choice = spec.get("profiler", "none")
    if choice == "none":
        return NoProfiler()
    if choice not in ("torch", "nsys"):
        raise profiling.ProfilingError(
            f"profiler {choice!r} is not resolved (the sweep resolves 'auto')"
        )
    requested = profiling.read_window(run_dir)
    window = requested
    if steps is not None:
        window, why = profiling.fit_window(requested, steps, choice)
        if rank == 0:
            profiling.record_fit(run_dir, requested, window, why, steps)
    import torch

    if choice == "nsys":
        if not torch.cuda.is_available():
            raise profiling.ProfilingError("profiler nsys needs CUDA (use PROFILER=torch on a CPU)")
        return NsysProfiler(window)
    trace = run_dir / profiling.TORCH_TRACE_DIR / f"rank{rank}.pt.trace.json.gz"
    return TorchProfiler(window, trace, torch.cuda.is_available())
