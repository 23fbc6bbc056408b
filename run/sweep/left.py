"""What is left to do: the one reading of which runs a sweep skips and which sweeps make must run.

    python -m run.sweep.left --scale smoke --exp L2 --exp N1 ...   # `stale: L2` (or `stale:`)

The sweep and the plan skip a cell by `skip_reason`, and the Makefile asks `stale` which sweeps
must run, so what `make plan` lists as missing is what the next `make` runs. File times cannot say
it: a run folder deleted or a summary.json corrupted under a newer record; a setting that renames
the runs (PROFILER, REPEATS, LLAMA3_DIR, MATRIX_FILE, ...); a GPU count that changes what is skipped.

A sweep is stale when its record (results/<scale>/sweeps/<EXP>.json) is absent or unreadable,
names other runs or skipped cells than the matrix gives now on this machine, or one of its runs
has no readable summary.json. Failed and oom runs are kept, as the plan keeps them. No torch, no
cost model is read, so make can ask on every call.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from run import store
from run.node import probe as hw
from run.program import program
from run.sweep import matrix as mx
from run.sweep.workloads import WORKLOADS


def skip_reason(
    scale: str, spec: dict[str, Any], info: dict[str, Any], limit: int, here: bool = True
) -> str:
    """Why the sweep skips a run on a node of `limit` ranks ("" to run it). With here=False (another
    node's plan) only the rank count counts; the workload's own reasons are this machine's, and a
    finished run is kept whatever they say."""
    if spec["gpus"] > limit:
        unit = "GPU(s)" if info.get("gpu_count") else "CPU core(s) for gloo ranks"
        node = "this machine" if here else "the node"
        return f"needs {spec['gpus']} ranks, {node} has {limit} {unit}"
    if not here or store.is_finished(scale, mx.run_name(spec)):
        return ""
    return WORKLOADS[spec["workload"]].skip_reason(spec, info)


def cells(
    exp_id: str, scale: str, info: dict[str, Any], matrix: dict[str, Any]
) -> tuple[list[str], list[str]]:
    override = mx.profiler_override()
    limit = hw.max_ranks(info)
    runs: list[str] = []
    skipped: list[str] = []
    for raw in mx.expand(exp_id, scale, matrix).specs:
        spec = mx.resolve_profiler(raw, override, info)
        (skipped if skip_reason(scale, spec, info, limit) else runs).append(mx.run_name(spec))
    return runs, skipped


def is_stale(exp_id: str, scale: str, info: dict[str, Any], matrix: dict[str, Any]) -> bool:
    runs, skipped = cells(exp_id, scale, info, matrix)
    try:
        record = store.read_json(store.sweep_file(scale, exp_id))
        recorded = {e["run"] for e in record["runs"]}
        recorded_skips = {e["run"] for e in record.get("skipped") or []}
    except (OSError, ValueError, TypeError, KeyError):
        return True  # absent or unreadable: the sweep writes it again
    if recorded != set(runs) or recorded_skips != set(skipped):
        return True
    for name in runs:
        summary = store.read_summary(store.run_dir(scale, name))
        if summary is None or store.is_unreadable(summary):
            return True
    return False


def stale(
    scale: str, exp_ids: list[str], info: dict[str, Any], matrix: dict[str, Any] | None = None
) -> list[str]:
    matrix = matrix or mx.load_matrix()
    return [e for e in exp_ids if is_stale(e, scale, info, matrix)]


@program()
def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m run.sweep.left", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("--scale", required=True)
    ap.add_argument("--exp", action="append", default=[], help="experiment id (repeatable)")
    args = ap.parse_args(argv)
    print("stale:", *stale(args.scale, args.exp, hw.probe()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
