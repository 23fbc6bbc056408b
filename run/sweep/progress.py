"""What a sweep prints while it runs (the estimates are the plan's cost model, run/sweep/cost.py)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from run import store
from run.sweep import plan


def hms(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    s = int(round(seconds))
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m" if h else (f"{m}m{s:02d}s" if m else f"{s}s")


class Progress:
    """What a sweep prints while it runs: `[k/N] run-name` over the scale's runnable runs with the
    run's estimate (the plan's cost model), the time of this sweep and the ETA of the scale, and a
    heartbeat line with the run's last log line while it goes."""

    def __init__(self, scale: str, info: dict[str, Any], matrix: dict[str, Any]) -> None:
        self.t0 = time.monotonic()
        self.total = 0
        self.done = 0
        self.left_s = 0.0  # estimated seconds of the scale's runs still to launch
        self.estimates: dict[str, float] = {}
        try:
            rows = plan.build(scale, None, info, matrix)
        except Exception as exc:  # noqa: BLE001 - progress must never stop a sweep
            print(f"[sweep] no estimates ({type(exc).__name__}: {exc})", flush=True)
            rows = []
        for row in rows:
            if row.state == "skipped":
                continue
            self.total += 1
            # the plan marks unsupported cells before they are recorded: those are still to do
            todo = row.state == "unsupported" and not store.is_finished(scale, row.name)
            if row.state == "missing" or todo:
                self.estimates[row.name] = row.est_s
                self.left_s += row.est_s
            else:
                self.done += 1

    def start(self, name: str) -> str:
        self.done += 1
        est = self.estimates.get(name)
        return (
            f"[{self.done}/{max(self.total, self.done)}] {name} (est. {hms(est)}; this sweep "
            f"{hms(time.monotonic() - self.t0)}, ETA of the scale {hms(self.left_s)})"
        )

    def finish(self, name: str) -> None:
        self.left_s = max(0.0, self.left_s - self.estimates.pop(name, 0.0))

    def heartbeat(self, name: str, running_s: float, log: Path) -> str:
        est = self.estimates.get(name)
        left = ""
        if est and running_s > est:  # the cost model was short: say by how much, not "0s left"
            left = f", over the estimate by {hms(running_s - est)}"
        elif est:
            left = f", about {hms(est - running_s)} left"
        last = _last_line(log)
        return f"        ... {name}: running {hms(running_s)}{left}" + (
            f" | {last}" if last else ""
        )


def _last_line(log: Path) -> str:
    try:
        with open(log, "rb") as fh:
            fh.seek(max(0, fh.seek(0, os.SEEK_END) - 4096))
            lines = [ln.strip() for ln in fh.read().decode(errors="replace").splitlines()]
    except OSError:
        return ""
    lines = [ln for ln in lines if ln]
    return lines[-1][:120] if lines else ""
