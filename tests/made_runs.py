"""Finished sweeps without the runs' work: the records and run folders a sweep of some
experiments leaves on this machine (names and skipped cells from run/sweep/left.py), each run
`ok` with an empty spec. For tests of make's file logic, which asks left.py what is left."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from run import store
from run.node import probe as hw
from run.sweep import left
from run.sweep import matrix as mx


def fabricate(
    root: Path, scale: str, exp_ids: list[str], info: dict[str, Any] | None = None
) -> list[Path]:
    """Write the records and runs under root (a RESULTS_DIR) as a sweep on `info` (default: this
    machine, as make's own call of left.py sees it) leaves them; returns the records' paths."""
    before = os.environ.get("RESULTS_DIR")
    os.environ["RESULTS_DIR"] = str(root)
    try:
        info, matrix = info or hw.probe(), mx.load_matrix()
        records = []
        for exp_id in exp_ids:
            runs, skipped = left.cells(exp_id, scale, info, matrix)
            for name in runs:
                run = store.run_dir(scale, name)
                store.write_json_atomic(run / store.SPEC, {})
                store.write_json_atomic(run / store.SUMMARY, {"name": name, "status": "ok"})
            record = store.sweeps_dir(scale) / f"{exp_id}.json"
            store.write_json_atomic(record, {
                "experiment": exp_id, "scale": scale,
                "runs": [{"run": n, "status": "ok", "reused": False} for n in runs],
                "skipped": [{"run": n, "gpus": 0, "reason": "fabricated"} for n in skipped],
            })  # fmt: skip
            records.append(record)
        return records
    finally:
        if before is None:
            os.environ.pop("RESULTS_DIR", None)
        else:
            os.environ["RESULTS_DIR"] = before
