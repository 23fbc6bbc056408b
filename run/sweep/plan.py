"""What a sweep will cost, known before anything runs: every run with its state and estimate.

    python -m run.sweep.plan --scale quick [--exp V3 --exp L1 ...] [--gpus N] [--brief]

The README's "What it will cost" says what it lists. Which node: this machine, unless `--gpus N`
names a node of N GPUs, or the scale needs GPUs (`device: gpu`) and this machine has none: then
the paper's node (4 x H100), and it says so. A run is `skipped` by the sweep's own test
(run/sweep/left.py); run names are the sweep's (PROFILER resolved); estimates are the cost model's
(run/sweep/cost.py), calibrated on this machine's finished runs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import dataclass, field
from typing import Any

from run import store
from run.errors import UserError
from run.node import probe as hw
from run.node import profiling
from run.program import program
from run.sweep import cost, left
from run.sweep import matrix as mx
from run.sweep.workloads import WORKLOADS

# One module per artifact, named after its make target (the Makefile builds a target when its
# module exists, and so does `make all`).
ARTIFACTS_DIR = store.REPO / "analysis" / "artifacts"
STATES = ("done", "missing", "failed", "oom", "unsupported", "skipped")
# how a missing run's reason starts when its folder is there but unreadable (store.read_summary)
UNREADABLE = "unreadable run files"


@dataclass
class PlanRow:
    name: str
    workload: str
    state: str
    gpus: int
    # calibrated launch + trace post-processing: for missing runs, and for failed/oom ones what
    # `--retry-failed` would spend; 0 for done, unsupported and skipped runs
    est_s: float
    steps: int
    epochs: int
    experiments: list[str] = field(default_factory=list)
    reason: str = ""
    spec: dict[str, Any] = field(default_factory=dict, repr=False)


# --- the plan ------------------------------------------------------------------------------------


def implemented(exp_id: str, matrix: dict[str, Any]) -> bool:
    """Whether `make all` runs an experiment: its target has an analysis module."""
    target = matrix["experiments"][exp_id]["target"]
    return (ARTIFACTS_DIR / f"{target.replace('-', '_')}.py").is_file()


def plan_node(
    scale: str, info: dict[str, Any], matrix: dict[str, Any], target_gpus: int | None = None
) -> tuple[dict[str, Any], str]:
    """The machine the plan is for, and a sentence saying which it is."""
    if target_gpus is not None and target_gpus < 1:
        raise UserError(f"--gpus {target_gpus}: a node has at least 1 GPU")
    needs_gpu = mx.scale_device(scale, matrix) == "gpu"
    if target_gpus is None and not (needs_gpu and not cost.on_gpu(info)):
        if cost.on_gpu(info):
            return info, f"estimated for this machine: {info['gpu_count']} x {info['gpu_model']}"
        cores = hw.max_ranks(info)
        return info, f"estimated for this machine: no GPU, {cores} CPU core(s) for gloo ranks"
    n = target_gpus if target_gpus is not None else cost.paper_node_gpus()
    model = info.get("gpu_model") if cost.on_gpu(info) else None
    node = {
        **info,
        "gpu_count": n,
        "gpu_model": model or f"{cost.PAPER_GPU} (assumed: the paper's GPU)",
        "gpus": [],
        "assumed_node": model is None,
    }
    here = f"{info['gpu_count']} x {info['gpu_model']}" if cost.on_gpu(info) else "no GPU"
    return node, f"estimated for a {n} x {model or cost.PAPER_GPU} node; this machine has {here}"


def _state(
    scale: str, name: str, spec: dict[str, Any], node: dict[str, Any], here: bool
) -> tuple[str, str]:
    """The state the sweep will find a run in, and why (skipped, failed, unsupported...)."""
    why = left.skip_reason(scale, spec, node, hw.max_ranks(node), here)
    if why:
        return "skipped", why
    run = store.run_dir(scale, name)
    summary = store.read_summary(run)
    if summary is not None and not store.is_unreadable(summary):
        status = summary["status"]
        if status == "ok":
            return "done", ""
        return status, str(summary.get("error") or "")
    reason = WORKLOADS[spec["workload"]].unsupported_reason(spec)
    if reason:
        return "unsupported", reason
    if summary is not None:
        # the sweep reruns an unreadable run as if it were absent (no --retry-failed needed)
        why = str(summary.get("why") or summary["error"])
        return "missing", f"{UNREADABLE}, the next sweep runs it again: {' '.join(why.split())}"
    return "missing", ""


def build(
    scale: str,
    exp_ids: list[str] | None,
    info: dict[str, Any],
    matrix: dict[str, Any] | None = None,
    target_gpus: int | None = None,
) -> list[PlanRow]:
    """One row per unique run of the experiments (all of `make all` when None), in order."""
    matrix = matrix or mx.load_matrix()
    node, _ = plan_node(scale, info, matrix, target_gpus)
    here = target_gpus is None and not node.get("assumed_node")  # not another node
    factors = calibration(scale, node, matrix)
    override = mx.profiler_override()
    if override == "nsys" and node.get("assumed_node") and not node.get("nsys"):
        node = {**node, "nsys": "nsys (assumed on the node)"}
    windows = {w: profiling.window_for(scale, w, matrix) for w in WORKLOADS}
    rows: dict[str, PlanRow] = {}
    if exp_ids is None:
        exp_ids = [e for e in matrix["experiments"] if implemented(e, matrix)]
    for exp_id in exp_ids:
        exp = mx.expand(exp_id, scale, matrix)
        for raw in exp.specs:
            spec = mx.resolve_profiler(raw, override, node)
            name = mx.run_name(spec)
            if name in rows:
                if exp_id not in rows[name].experiments:
                    rows[name].experiments.append(exp_id)
                continue
            state, reason = _state(scale, name, spec, node, here)
            if state == "missing" and not reason and cost.expect_oom(spec, node):
                reason = (
                    f"estimated as out of memory below {cost.QAT_FITS_GPUS} GPUs, as the paper's"
                )
            workload = spec["workload"]
            steps, epochs = WORKLOADS[workload].planned_steps(spec), spec["epochs"]
            est = 0.0
            if state in ("missing", "failed", "oom"):
                w = windows[workload]
                est = factors.get(workload, (1.0, 0))[0] * cost.estimate_s(
                    spec, node, w
                ) + cost.post_s(spec, node, w)
            row = (name, workload, state, spec["gpus"], est, steps, epochs, [exp_id], reason, spec)
            rows[name] = PlanRow(*row)
    return list(rows.values())


# --- local calibration: the cost model's estimates against this machine's finished runs ---------


def _same_kind(hardware: dict[str, Any] | None, info: dict[str, Any]) -> bool:
    """Whether a run's recorded hardware is the kind of machine `info` describes."""
    if not hardware:
        return True
    if not cost.on_gpu(info):
        return not hardware.get("gpu_count")
    if not hardware.get("gpu_count"):
        return False
    model = str(hardware.get("gpu_model") or "")
    if info.get("assumed_node"):
        return cost.PAPER_GPU in model
    return model == str(info.get("gpu_model") or "")


def calibration(
    scale: str, info: dict[str, Any], matrix: dict[str, Any]
) -> dict[str, tuple[float, int]]:
    """Per workload with such runs: (the calibration factor, number of runs); a workload without
    runs keeps the model's estimate (factor 1.0)."""
    ratios: dict[str, list[float]] = {}
    base = store.runs_dir(scale)
    if not base.is_dir():
        return {}
    for d in sorted(base.iterdir()):
        if d.name.startswith(".") or not d.is_dir():
            continue
        summary = store.read_summary(d) or {}  # an unreadable run reads as failed: left out
        wall = summary.get("launch_wall_s")
        if summary.get("status") != "ok" or not isinstance(wall, (int, float)) or wall <= 0:
            continue
        try:
            spec = store.read_json(d / store.SPEC)  # read_summary found it an object
        except (OSError, ValueError):
            continue
        prov = d / store.PROVENANCE
        if prov.is_file():
            try:
                hardware = store.read_json(prov).get("hardware")
            except (OSError, ValueError, AttributeError):  # AttributeError: not an object
                hardware = None
            if not _same_kind(hardware, info):
                continue
        workload = spec.get("workload")
        if workload not in WORKLOADS:
            continue
        try:
            est = cost.estimate_s(spec, info, profiling.window_for(scale, workload, matrix))
        except (KeyError, TypeError, ValueError):
            continue  # a spec of an older layout: not worth failing the plan for
        if est > 0:
            ratios.setdefault(workload, []).append(wall / est)
    return {w: (statistics.median(r), len(r)) for w, r in ratios.items()}


# --- totals and output ---------------------------------------------------------------------------


def to_spend(rows: list[PlanRow]) -> list[PlanRow]:
    """The runs a sweep will launch (failed/oom only with --retry-failed)."""
    return [r for r in rows if r.state == "missing"]


def wall_s(rows: list[PlanRow]) -> float:
    return sum(r.est_s for r in to_spend(rows))


def gpu_hours(rows: list[PlanRow]) -> float:
    return sum(r.est_s * r.gpus for r in to_spend(rows)) / 3600


def fmt_s(s: float) -> str:
    if s <= 0:
        return "-"
    if s < 60:
        return f"{s:.0f} s"
    if s < 3600:
        return f"{s / 60:.0f} min" if s >= 600 else f"{s / 60:.1f} min"
    h, m = divmod(round(s / 60), 60)
    if h >= 48:
        return f"{s / 86400:.1f} days"
    return f"{h} h {m:02d} min"


def _counts(rows: list[PlanRow]) -> str:
    n = {s: sum(1 for r in rows if r.state == s) for s in STATES}
    return ", ".join(f"{v} {s}" for s, v in n.items() if v)


def render(
    rows: list[PlanRow],
    info: dict[str, Any],
    scale: str,
    *,
    node_note: str | None = None,
    calib: dict[str, tuple[float, int]] | None = None,
    matrix: dict[str, Any] | None = None,
    brief: bool = False,
) -> str:
    """The plan as text: runs, subtotals per experiment, totals, what the model rests on."""
    if node_note is None:
        node_note = (
            f"estimated for {info['gpu_count']} x {info['gpu_model']}"
            if cost.on_gpu(info)
            else "estimated for this machine (no GPU)"
        )
    exps = _experiments(rows, matrix)
    out = [f"plan for PROFILE={scale}: {len(rows)} runs of {len(exps)} experiment(s); {node_note}"]
    n_repeats = mx.repeats()
    if n_repeats > 1:
        out.append(
            f"REPEATS={n_repeats}: each run spec {n_repeats} times, seeds seed..seed+{n_repeats - 1}"
            " (`-seed<s>` in the name)"
        )
    if matrix is not None:
        left = [e for e in matrix["experiments"] if e not in exps and not implemented(e, matrix)]
        if left:
            out.append(f"not run by `make all` (not implemented yet): {' '.join(left)}")
    if not brief:
        out += ["", *_run_lines(rows)]
    out += ["", *_per_experiment(rows, exps, matrix), "", *_totals(rows, info)]
    model = (
        "the paper's times (Tables 2 and 3 for vision, Table 5 for LLM, in reference/paper/*.csv) "
        "and the assumptions in run/sweep/cost.py"
        if cost.on_gpu(info)
        else "a crude CPU model fitted to the smoke make all on 2 cores (run/sweep/cost.py)"
    )
    calibrated = "no local runs to calibrate on yet (factor 1.0)"
    if calib:
        local = ", ".join(f"{w} x{f:.2f} ({n} runs)" for w, (f, n) in sorted(calib.items()))
        n = sum(k for _, k in calib.values())
        calibrated = f"calibrated on {n} local run(s) of this scale: {local}"
    out.append(f"model: {model}; {calibrated}")
    return "\n".join(out)


def _experiments(rows: list[PlanRow], matrix: dict[str, Any] | None) -> list[str]:
    """The experiments of the rows, in the matrix's order (not the order runs were first met)."""
    exps: list[str] = []
    for r in rows:
        exps.extend(e for e in r.experiments if e not in exps)
    if matrix is not None:
        order = list(matrix["experiments"])
        exps.sort(key=lambda e: order.index(e) if e in order else len(order))
    return exps


def _run_lines(rows: list[PlanRow]) -> list[str]:
    out = [f"{'state':<11} {'est':>9} {'gpus':>4} {'steps':>6} {'ep':>3}  run  [experiments]"]
    for r in rows:
        note = f"  ({r.reason})" if r.reason and r.state != "unsupported" else ""
        out.append(
            f"{r.state:<11} {fmt_s(r.est_s) if r.state == 'missing' else '-':>9} {r.gpus:>4} "
            f"{r.steps:>6} {r.epochs:>3}  {r.name}  [{' '.join(r.experiments)}]{note[:160]}"
        )
    return out


def _per_experiment(
    rows: list[PlanRow], exps: list[str], matrix: dict[str, Any] | None
) -> list[str]:
    out = [
        "per experiment (its own runs; shared runs count in each; `make <target>` also runs the "
        "noise cells every table reads: `make plan ARTIFACTS=<target>` sums them):"
    ]
    targets = (matrix or {}).get("experiments", {})
    for e in exps:
        mine = [r for r in rows if e in r.experiments]
        target = targets.get(e, {}).get("target", "")
        out.append(
            f"  {e:<4} {target:<24} {len(mine):>3} runs ({_counts(mine)}): "
            f"{fmt_s(wall_s(mine))}, {gpu_hours(mine):.2f} GPU-h"
        )
    return out


def _totals(rows: list[PlanRow], info: dict[str, Any]) -> list[str]:
    out = [f"runs: {len(rows)} ({_counts(rows)})"]
    # stand-ins for the real model: their names say so (llm_spec.run_name), the total says why
    parts = [r.name.split("-") for r in rows if r.name.startswith("llama3_8b-")]
    n_random, n_bytes = sum("random" in p for p in parts), sum("tok_bytes" in p for p in parts)
    if n_random or n_bytes:
        out.append(
            f"Llama3-8B stand-ins: {n_random} run(s) with random weights, {n_bytes} with the byte "
            "tokenizer (no LLAMA3_DIR / LLAMA3_TOKENIZER: `make assets HF_TOKEN=hf_...`)"
        )
    gloo = "" if cost.on_gpu(info) else "; on a CPU machine, gloo ranks count as GPUs"
    out.append(f"GPU-hours still to spend: {gpu_hours(rows):.2f} (missing runs: est x GPUs{gloo})")
    out.append(
        f"wall time on this node: {fmt_s(wall_s(rows)) if to_spend(rows) else 'nothing to run'} "
        "(one run at a time: the sum of est over missing runs)"
    )
    retry = [r for r in rows if r.state in ("failed", "oom")]
    if retry:
        out.append(
            f"{len(retry)} failed/oom run(s) are kept, not re-run; `python -m run.sweep "
            f"--retry-failed` would add about {fmt_s(sum(r.est_s for r in retry))}"
        )
    unreadable = [r for r in rows if r.reason.startswith(UNREADABLE)]
    if unreadable:
        out.append(
            f"{len(unreadable)} missing run(s) have unreadable files, counted above (`make plan` "
            "names them): the next sweep runs them again"
        )
    skipped = [r for r in rows if r.state == "skipped"]
    if skipped:
        out.append(f"{len(skipped)} run(s) skipped: the node cannot run them (reasons above)")
    return out


@program()
def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--scale", help="smoke, quick, paper (default: what `make all` picks)")
    ap.add_argument(
        "--exp", action="append", help="experiment id (repeatable); default: make all's"
    )
    ap.add_argument("--gpus", type=int, help="plan for a node of this many GPUs")
    ap.add_argument("--brief", action="store_true", help="subtotals and totals only")
    ap.add_argument("--json", action="store_true", help="the totals as one JSON object")
    args = ap.parse_args(argv)
    info = hw.probe()
    scale = args.scale or hw.default_scale(info)
    matrix = mx.load_matrix()
    node, note = plan_node(scale, info, matrix, args.gpus)
    rows = build(scale, args.exp, info, matrix, args.gpus)
    calib = calibration(scale, node, matrix)
    if args.json:  # what the report's "next on a GPU node" reads (report/nextgpu.py)
        where = (f"{node['gpu_count']} x {node['gpu_model']}".removesuffix(
            " (assumed: the paper's GPU)") if cost.on_gpu(node) else
            "this machine (no GPU)")  # fmt: skip
        print(json.dumps({"scale": scale, "runs": len(rows),
                          "missing": len(to_spend(rows)), "gpu_hours": gpu_hours(rows),
                          "wall_s": wall_s(rows), "wall": fmt_s(wall_s(rows)),
                          "node": where}))  # fmt: skip
        return 0
    print(render(rows, node, scale, node_note=note, calib=calib, matrix=matrix, brief=args.brief))
    return 0


if __name__ == "__main__":
    sys.exit(main())
