"""What ran: the settings of a scale's runs read from their own spec.json and summary.json (not
from the matrix), set beside the `paper` scale's, and the software beside the papers'.

A setting's value is written once for the experiments that share it, and the others are named:
"0.002; 0.003 in V3, V4, V7".
"""

from __future__ import annotations

import datetime as dt
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from analysis.common import read_sweep_record, unreadable_why, warn_once
from run import store
from run.llm.catalog import TEMPLATES
from run.sweep import matrix as mx


def _n(v: Any) -> str:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return str(v)
    return f"{int(v):,}" if float(v).is_integer() else f"{v:g}"


def _steps(s: dict[str, Any], summ: dict[str, Any] | None) -> str | None:
    """Steps per run, and how many of them are timed (s/it leaves out the warm-up)."""
    if summ and isinstance(summ.get("steps"), int) and summ["steps"]:
        timed = summ["steps"] - int(summ.get("warmup_steps_excluded") or 0)
        return f"{summ['steps']} ({timed})"
    if summ is not None:  # a run that did not step (unsupported): says nothing
        return None
    return _n(s["max_steps"]) if s["max_steps"] else "one epoch"


# (workload, setting, value of one run from its spec and summary; None: not applicable)
Getter = Callable[[dict[str, Any], dict[str, Any] | None], Any]
SETTINGS: list[tuple[str, str, Getter]] = [
    ("vision", "data set",
     lambda s, _: s["dataset"] + (" (Scenario B)" if s["scenario"] == "B" else "")),
    ("vision", "train / test images",
     lambda s, _: f"{_n(s['train_images'])} / {_n(s['test_images'])}"),
    ("vision", "image size [px]", lambda s, _: s["image_size"]),
    ("vision", "MobileNetV2 width multiplier", lambda s, _: s["width_mult"]),
    ("vision", "batch size per rank", lambda s, _: s["batch_size"]),
    ("vision", "learning rate (Adam)", lambda s, _: s["lr"]),
    ("vision", "DataLoader workers per rank", lambda s, _: s["num_workers"]),
    ("vision", "epochs", lambda s, _: s["epochs"]),
    # the tokenizer a run used (a plan resolves "auto" on this machine's assets: not shown)
    ("llm", "model",
     lambda s, summ: f"{s['model']}, {s['tokenizer']} tokenizer" if summ is not None
     else s["model"]),
    ("llm", "batch size per rank", lambda s, _: s["batch_size"]),
    ("llm", "learning rate (AdamW)", lambda s, _: s["lr"]),
    ("llm", "warm-up steps (not timed)",
     lambda s, summ: (summ or {}).get("warmup_steps_excluded",
                                      s["warmup_steps"] if summ is None else None)),
    ("llm", "steps per run (timed)", _steps),
    ("llm", "template rows",
     lambda s, _: s["template_rows"] if s["dataset"] in TEMPLATES else None),
    ("any", "ranks ('GPUs') per run", lambda s, _: s["gpus"]),
]  # fmt: skip


def values(vals: list[Any]) -> str:
    """One experiment's values of a setting: one value, a few, or min-max of three or more."""
    distinct = sorted(set(vals), key=lambda v: (not isinstance(v, (int, float)), v))
    nums = [v for v in distinct if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if len(nums) == len(distinct) >= 3:
        return f"{_n(nums[0])}-{_n(nums[-1])}"
    return ", ".join(_n(v) for v in distinct)


def grouped(per_exp: dict[str, list[Any]], order: list[str]) -> str:
    """The value most experiments share, then the others with their experiments."""
    groups: dict[str, list[str]] = {}
    for e in sorted(per_exp, key=lambda e: order.index(e) if e in order else len(order)):
        if per_exp[e]:
            groups.setdefault(values(per_exp[e]), []).append(e)
    if not groups:
        return ""
    main = max(groups, key=lambda t: len(groups[t]))
    rest = [f"{t} in {', '.join(es)}" for t, es in groups.items() if t != main]
    return "; ".join([main, *rest])


def table(specs: dict[str, list[tuple[dict[str, Any], dict[str, Any] | None]]],
          order: list[str]) -> dict[tuple[str, str], str]:  # fmt: skip
    """(workload, setting) -> its grouped value, over each experiment's (spec, summary) pairs."""
    out = {}
    for workload, name, get in SETTINGS:
        per_exp: dict[str, list[Any]] = {}
        for e, pairs in specs.items():
            for s, summ in pairs:
                if workload in ("any", s["workload"]):
                    v = get(s, summ)
                    if v is not None:
                        per_exp.setdefault(e, []).append(v)
        text = grouped(per_exp, order)
        if text:
            out[(workload, name)] = text
    return out


def ran(root: Path, scale: str, order: list[str]) -> dict[str, Any]:
    """A results folder's runs: their settings, how many, their repeats, their summed wall time,
    and the compute threads of a CPU rank, each read from the runs' own files; per experiment,
    its runs and their wall seconds (a shared run counts in each experiment that needs it)."""
    specs: dict[str, list[tuple[dict[str, Any], dict[str, Any] | None]]] = {}
    seen: dict[str, dict[str, Any]] = {}
    repeats: dict[str, list[int]] = {}
    spans: list[tuple[float, float]] = []  # each run's start and end (unix s)
    skipped = 0
    unreadable: list[str] = []
    counts: dict[str, int] = {}
    seconds: dict[str, float] = {}
    for exp, rec in sweep_records(root, scale, order):
        cells = Counter(re.sub(r"-seed\d+$", "", e["run"]) for e in rec["runs"])
        repeats[exp] = [max([int(rec.get("repeats") or 1), *cells.values()])]
        skipped += len(rec.get("skipped") or [])
        for entry in rec["runs"]:
            run = store.run_dir(scale, entry["run"], root)
            summ = store.read_summary(run)
            if summ is None:  # listed, but its folder is gone: nothing to read
                continue
            counts[exp] = counts.get(exp, 0) + 1
            wall = summ.get("launch_wall_s") or summ.get("total_time_s") or 0.0
            seconds[exp] = seconds.get(exp, 0.0) + float(wall)
            if store.is_unreadable(summ):
                if entry["run"] not in unreadable:
                    unreadable.append(entry["run"])
                    why = unreadable_why(summ)
                    warn_once(f"{entry['run']}: unreadable ({why}), left out of What ran")
                continue
            seen[entry["run"]] = summ
            started = _started(run)
            if started is not None:
                spans.append((started, started + float(summ.get("launch_wall_s") or 0.0)))
            specs.setdefault(exp, []).append((store.read_json(run / store.SPEC), summ))
    threads = sorted({int(t) for s in seen.values() if s.get("device") == "cpu"
                      for t in [s.get("cpu_threads_per_rank")
                                or (s.get("runtime") or {}).get("cpu_threads_per_rank")]
                      if t})  # fmt: skip
    return {
        "settings": table(specs, order),
        "repeats": grouped(repeats, order),
        "runs": len(seen),
        "status": dict(Counter(s.get("status", "?") for s in seen.values())),
        "skipped": skipped,
        "wall_s": sum(
            float(s.get("launch_wall_s") or s.get("total_time_s") or 0.0) for s in seen.values()
        ),  # fmt: skip
        # from the first run's start to the last one's end: the sweep's wall time, analysis and
        # waits between runs included
        "span_s": max(e for _, e in spans) - min(b for b, _ in spans) if spans else 0.0,
        "first": _utc(min(b for b, _ in spans)) if spans else "",
        "last": _utc(max(e for _, e in spans)) if spans else "",
        "threads": threads,
        "experiments": list(specs),
        # runs whose files cannot be read (store.read_summary): left out, the next sweep reruns them
        "unreadable": unreadable,
        "run_counts": counts,
        "run_seconds": seconds,
    }


def sweep_records(root: Path, scale: str, order: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """(experiment, record) of each sweep record of the matrix's experiments (`order`). Any other
    file in sweeps/, and a record that cannot be read, is named on stderr and skipped."""
    out = []
    for path in sorted(store.sweeps_dir(scale, root).glob("*.json")):
        exp = path.stem  # the sweep names a record after its experiment
        if exp not in order:
            warn_once(f"{path}: not an experiment of the matrix, ignored")
            continue
        rec, why = read_sweep_record(path)
        if rec is not None:
            out.append((exp, rec))
            continue
        warn_once(f"{path}: not a readable sweep record ({why}), left out; rerun its sweep: "
                   f"`python -m run.sweep --scale {scale} --exp {exp}`")  # fmt: skip
    return out


def _started(run: Path) -> float | None:
    """When a run was launched: its provenance's `created` (unix s), None if unknown."""
    path = run / store.PROVENANCE
    try:
        return dt.datetime.fromisoformat(store.read_json(path)["created"]).timestamp()
    except (OSError, KeyError, TypeError, ValueError):
        return None


def _utc(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def planned(scale: str, exps: list[str], matrix: dict[str, Any]) -> dict[tuple[str, str], str]:
    """The same settings as a scale of the matrix sets them (no run needed)."""
    order = list(matrix["experiments"])
    specs = {}
    for e in exps:
        if e in matrix["experiments"] and scale in mx.scales(matrix):
            specs[e] = [(s, None) for s in mx.expand(e, scale, matrix, 1).specs]
    rows = table(specs, order)
    reps = {e: [int(matrix["experiments"][e].get("repeats") or 1)] for e in specs}
    rows[("any", "repeats per cell")] = grouped(reps, order)
    return rows


def software(m: dict[str, Any]) -> dict[str, str]:
    """One machine's versions of what the papers name (its newest run's provenance)."""
    hw = m.get("hardware") or {}
    v = hw.get("versions", {})
    dali = next((f"{val} ({k.removeprefix('nvidia-dali-')})" for k, val in v.items()
                 if k.startswith("nvidia-dali") and val), "")  # fmt: skip
    return {"Python": hw.get("python", ""), "torch": v.get("torch", ""),
            "torchvision": v.get("torchvision", ""), "torchtune": v.get("torchtune", ""),
            "NVIDIA DALI": dali,
            "CUDA": (hw.get("runtime") or {}).get("cuda") or "none (CPU build)",
            "Nsight Systems": hw.get("nsys_version") or "not installed"}  # fmt: skip


def software_rows(machines: list[dict[str, Any]], paper: dict[str, str]) -> list[dict[str, Any]]:
    """Our versions, one column per machine, beside the papers' (assumptions.yaml)."""
    ours = [software(m) for m in machines]
    names = list(dict.fromkeys([k for o in ours for k in o] + list(paper)))
    return [{"name": n, "values": [o.get(n, "") for o in ours], "paper": paper.get(n, "not stated")}
            for n in names]  # fmt: skip


def what_ran(scale: str, roots: list[Path], matrix: dict[str, Any]) -> dict[str, Any]:
    """Each results folder's runs (settings from their specs) beside the paper scale's: one
    row per setting, one value per folder, and the paper scale's for the same experiments."""
    order = list(matrix["experiments"])
    machines = [ran(r, scale, order) for r in roots]
    exps = list(dict.fromkeys(e for m in machines for e in m["experiments"]))
    beside = scale != "paper" and "paper" in mx.scales(matrix)
    paper = planned("paper", exps, matrix) if beside else {}
    rep = ("any", "repeats per cell")
    for m in machines:
        m["settings"][rep] = m["repeats"]
    order_keys = [(w, name) for w, name, _ in SETTINGS] + [rep]
    keys = [k for k in order_keys if k in paper or any(k in m["settings"] for m in machines)]
    label = {"vision": "vision", "llm": "LLM", "any": "all"}
    rows = [{"setting": f"{label[w]}: {name}", "paper": paper.get((w, name), ""),
             "values": [m["settings"].get((w, name), "") for m in machines]}
            for w, name in keys]  # fmt: skip
    return {"machines": machines, "table": rows, "paper_scale": beside}
