"""`make gpu-check`: every GPU code path of the artifact at tiny scale, each with its assertions.

    python -m run.checks                  # on the CUDA GPUs this job may use
    python -m run.checks --only vision-fp16 --only llm-qat
    python -m run.checks --list

Offline and in minutes on one H100: MobileNetV2 on the digits (fp64; fp32 under torch.profiler;
fp16 with GradScaler; bf16 with channels_last; pin_memory; each strategy; a run made to exhaust
GPU memory, recorded as `oom`), torchtune's LoRA, QLoRA, DPO and QAT recipes on the tiny llama3
(the distributed recipes under torchrun at 1 rank on one GPU), one LoRA fp32 batch-2 run of the
Llama3-8B shape with random weights, and with two or more GPUs the NCCL paths (DDP all-reduce,
FSDP all-gather). Each run goes through the sweep's own `execute` into results/gpu-check/runs/;
one line per check, then `gpu-check: N passed, N failed, N skipped in T s`. Whatever one check
raises is its failure, with its root cause, and the next one runs. results/gpu-check/ gets
gpu_check.json (every check with what it saw) and bundle.tar.gz (it, the probe, the versions and
each check's log tail, to attach to a report). Exit status 1 if any check fails. Without a GPU
this command says so in one line and exits 0 (the CPU test tier runs the list on gloo ranks).

Beside torch it needs: torchvision, torchtune 0.6.1, torchao 0.15.0, torchdata, omegaconf,
datasets, pandas, PyYAML, Pillow (README: "Checking a GPU node").
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import signal
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from run import settings, store
from run.checks import cases
from run.checks.cases import Check, Seen, skip_reason, spec_of
from run.errors import UserError
from run.node import bundle, probe
from run.program import program
from run.sweep import matrix as mx
from run.sweep import runner as sweep
from run.sweep.failure import root_cause
from run.sweep.workloads import WORKLOADS

SCALE = "gpu-check"
# The profiling windows of the checks (a matrix scale block of their own).
WINDOWS = {
    "vision": {"wait_steps": 1, "warmup_steps": 1, "active_steps": 3, "max_seconds": 0},
    "llm": {"wait_steps": 0, "warmup_steps": 1, "active_steps": 2, "max_seconds": 120},
}
MATRIX = {"scales": {SCALE: {"profiling": WINDOWS}}}
REPORT = "gpu_check.json"
# per check, unless RUN_TIMEOUT_S says otherwise: the longest check (an 8B model built with
# random weights, then a few steps) takes minutes; a hang must not hold back the rest
CHECK_TIMEOUT_S = 1800


def run_one(
    check: Check,
    spec: dict[str, Any],
    info: dict[str, Any],
    cuda: bool,
    ran: dict[str, dict[str, Any]] | None = None,
) -> dict:
    """Run the check's spec and judge the run; a spec already run by an earlier check of the same
    run_checks call (`ran`: run name -> summary; on a CPU only, cases.Check.cpu_spec) is read
    instead of run again."""
    name = mx.run_name(spec)
    ran = {} if ran is None else ran
    if name in ran:
        summary = ran[name]
    else:
        WORKLOADS[check.workload].preflight([spec])
        shutil.rmtree(store.run_dir(SCALE, name), ignore_errors=True)  # a check runs anew
        summary = ran[name] = sweep.execute(spec, SCALE, info, MATRIX)
    seen = Seen(summary, store.run_dir(SCALE, name), cuda, spec["gpus"])
    problems = []
    if summary.get("status") != check.status:
        problems.append(
            f"status {summary.get('status')!r} ({summary.get('error')}), expected {check.status!r}"
        )
    else:
        for assertion in check.expect:
            problems += assertion(seen)
    why = summary.get("error") if summary.get("status") != check.status else "; ".join(problems)
    return {
        "result": "fail" if problems else "pass",
        "problems": problems,
        "root_cause": why or None,
        "status": summary.get("status"),
        "peak_memory_bytes": summary.get("peak_memory_bytes"),
        "s_per_it": summary.get("s_per_it"),
        "images_per_s": summary.get("images_per_s"),
    }


def run_checks(
    names: list[str] | None,
    info: dict[str, Any],
    cuda: bool,
    echo: Callable[[str], None] = print,
    records: list[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """Run the checks (all, or those named), each record appended to `records` as it ends (an
    interrupted run keeps the finished ones); whatever a check raises is its failure."""
    chosen = [c for c in cases.CHECKS if not names or c.name in names]
    unknown = set(names or []) - {c.name for c in cases.CHECKS}
    if unknown:
        raise UserError(f"unknown check(s): {', '.join(sorted(unknown))} (see --list)")
    ranks = probe.max_ranks(info)
    records = [] if records is None else records
    ran: dict[str, dict[str, Any]] = {}
    for check in chosen:
        t0 = time.monotonic()
        rec: dict[str, Any] = {"check": check.name, "what": check.what, "run": None}
        try:
            spec = spec_of(check, ranks, cuda)  # validated even where the check is skipped
            why = skip_reason(check, cuda, ranks)
            if why:
                echo(f"SKIP {check.name}: {why}")
                records.append({**rec, "result": "skip", "why": why})
                continue
            rec["run"] = mx.run_name(spec)
            rec.update(run_one(check, spec, info, cuda, ran))
        except Exception:  # noqa: BLE001 - one broken check must not hide the others' results
            trace = traceback.format_exc()
            cause = root_cause(trace)
            rec.update(result="fail", problems=[f"crashed: {cause}"], root_cause=cause)
            rec["traceback"] = trace
        rec["wall_s"] = round(time.monotonic() - t0, 1)
        detail = "; ".join(rec["problems"]) if rec["result"] == "fail" else check.what
        echo(f"{rec['result'].upper()} {check.name} ({rec['wall_s']:.0f} s): {detail}")
        records.append(rec)
    return records


def counts(records: list[dict[str, Any]], seconds: float) -> str:
    n = {k: sum(r["result"] == k for r in records) for k in ("pass", "fail", "skip")}
    return (
        f"gpu-check: {n['pass']} passed, {n['fail']} failed, {n['skip']} skipped in {seconds:.0f} s"
    )


def write_report(
    records: list[dict[str, Any]], info: dict[str, Any], lines: list[str], result: str
) -> Path:
    """gpu_check.json and gpu_check.txt in results/gpu-check/, and the bundle holding them."""
    out = store.scale_dir(SCALE)
    report = {"command": " ".join(sys.orig_argv), "hardware": info, "checks": records,
              "result": result, "versions": bundle.versions(info)}  # fmt: skip
    store.write_json_atomic(out / REPORT, report)
    text = "\n".join([*lines, result]) + "\n"
    store.write_text_atomic(out / "gpu_check.txt", text)
    runs = [
        {"name": r["check"], "scale": SCALE, "run": r.get("run"), "result": r["result"],
         "status": r.get("status"), "root_cause": r.get("root_cause") or r.get("why"),
         "traceback": r.get("traceback")}
        for r in records
    ]  # fmt: skip
    files = {REPORT: (out / REPORT).read_text(), "gpu_check.txt": text}
    return bundle.build(out / bundle.NAME, info, runs, files)


def _bundle(records: list[dict[str, Any]], info: dict[str, Any], lines: list, result: str) -> None:
    try:
        path = write_report(records, info, lines, result)
    except OSError as exc:  # a full disk must not hide the checks' own verdict
        print(f"gpu-check: no bundle written ({exc})", file=sys.stderr)
        return
    print(f"gpu-check: attach {path} to a report (README: 'Checking a GPU node')", flush=True)


@program()
def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m run.checks",
        description=__doc__,
        formatter_class=argparse.RawTextHelpFormatter,
    )
    ap.add_argument("--only", action="append", help="run only this check (repeatable)")
    ap.add_argument("--list", action="store_true", help="list the checks and exit")
    args = ap.parse_args(argv)
    if args.list:
        for c in cases.CHECKS:
            print(f"{c.name:30s} [{c.needs}] {c.what}")
        return 0
    logging.getLogger("torchao").setLevel(logging.ERROR)
    info = probe.probe()
    problem = probe.cuda_problem(info)
    if problem:
        line = f"gpu-check: FAIL: {problem}"
        print(line, file=sys.stderr)
        _bundle([], info, [], line)  # the probe and versions say what is wrong with the node
        return 1
    if not info["gpu_count"]:
        print("gpu-check: no CUDA GPU visible on this machine: nothing to check (the CPU test "
              "tier runs the same checks on gloo ranks)")  # fmt: skip
        return 0
    t0 = time.monotonic()
    print(
        f"gpu-check on {info['gpu_count']} x {info['gpu_model']}: {len(cases.CHECKS)} checks",
        flush=True,
    )
    lines: list[str] = []

    def echo(line: str) -> None:
        lines.append(line)
        print(line, flush=True)

    if not settings.given("RUN_TIMEOUT_S"):
        # a hung check becomes that check's failure ("timed out") and the next one runs
        os.environ["RUN_TIMEOUT_S"] = str(CHECK_TIMEOUT_S)
    # SLURM's scancel / time limit sends SIGTERM: end like Ctrl-C, bundling what finished
    signal.signal(signal.SIGTERM, _interrupt)
    records: list[dict[str, Any]] = []
    try:
        run_checks(args.only, info, cuda=True, echo=echo, records=records)
    except KeyboardInterrupt:
        summary = counts(records, time.monotonic() - t0) + " (interrupted: the rest did not run)"
        _bundle(records, info, lines, summary)
        print(summary, file=sys.stderr, flush=True)
        return 130
    summary = counts(records, time.monotonic() - t0)
    _bundle(records, info, lines, summary)
    print(summary, flush=True)
    return 1 if any(r["result"] == "fail" for r in records) else 0


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt
