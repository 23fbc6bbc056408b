"""Render the report (Markdown and LaTeX) from results alone, one column per machine.

    python -m report.build --profile smoke                       # this machine's results/
    python -m report.build --profile paper --results results --results results/reference/h100

Writes report/out/<profile>/report.md and report.tex. Reads only the artifacts' tables
(results/<profile>/tables/*.json, written by `python -m analysis`), the runs' provenance and
summaries, the claims (reference/paper/claims.yaml), the assumptions and the matrix: it computes
nothing the analysis did not write, so it runs on a laptop.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import jinja2
import yaml

from analysis.claims import spec as cs
from analysis.claims import verdicts as cl
from analysis.claims.quantities import num
from analysis.driver import ARTIFACTS_DIR
from report.figures.common import OUT_DIR, figures_dir
from run import store
from run.sweep import matrix as mx

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
ASSUMPTIONS = ROOT / "experiments" / "assumptions.yaml"
VERDICT_ORDER = (cl.HOLDS, cl.FAILS, cl.INCONCLUSIVE, cl.UNMEASURED)
TEX_ESCAPES = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
               "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}",
               "^": r"\textasciicircum{}"}  # fmt: skip
UNITS = {"_s": "s", "_pct": "%", "_gib": "GiB", "_mib": "MiB", "_s_per_it": "s/it"}
LABELS = {"gpus": "GPUs", "s_per_it": "s/it", "pin_memory": "pin_memory",
          "image_size": "image size [px]", "htod_bytes_per_image": "HtoD [B/image]",
          "input_bytes_per_image": "input [B/image]"}  # fmt: skip


def tex(value: Any) -> str:
    return "".join(TEX_ESCAPES.get(ch, ch) for ch in str(value))


def texpath(value: Any) -> str:
    """A path or run name in typewriter type that may break after / and - (a long one would
    run off the page: \\texttt never hyphenates)."""
    return tex(value).replace("/", "/\\allowbreak{}").replace("-", "-\\allowbreak{}")


def duration(seconds: float | None) -> str:
    """Wall time in the unit that reads best: s under 2 min, min under 2 h, else h."""
    if not seconds:
        return "-"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def cell(value: Any) -> str:
    """A table cell: 3 significant digits, integers as integers, on/off for booleans."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, (int, float)):
        return num(value)
    return str(value)


def heading(col: str) -> str:
    if col in LABELS:
        return LABELS[col]
    for suffix, unit in UNITS.items():
        if col.endswith(suffix):
            return f"{col[: -len(suffix)].replace('_', ' ')} [{unit}]"
    return col.replace("_", " ")


# ---------------------------------------------------------------- one results folder = one machine
def machine(root: Path, profile: str) -> dict[str, Any]:
    """Where one results folder's numbers came from: the newest run's provenance."""
    provs = sorted(store.runs_dir(profile, root).glob(f"*/{store.PROVENANCE}"),
                   key=lambda p: p.stat().st_mtime)  # fmt: skip
    info: dict[str, Any] = {"root": str(root), "label": str(root), "hardware": None}
    if not provs:
        return info
    prov = store.read_json(provs[-1])
    summary = provs[-1].parent / store.SUMMARY
    runtime = store.read_json(summary).get("runtime") if summary.is_file() else None
    hw = prov["hardware"]
    gpus = f"{hw['gpu_count']} x {hw['gpu_model']}" if hw["gpu_count"] else "CPU (gloo ranks)"
    info["label"] = gpus if hw["gpu_count"] else f"{gpus}, {hw['cpu_count']} cores"
    info["hardware"] = {
        "git": prov["git"],
        "versions": {k: v for k, v in prov["versions"].items() if v},
        "runtime": runtime or {},
        "cpu": f"{hw['cpu_count']} x {hw['cpu_model']}",
        "gpus": gpus,
        "numa_nodes": len(hw["numa_nodes"]),
        "numactl": hw["numactl"] or "not found",
        "nsys": hw["nsys"] or "not found",
        "host": hw["hostname"],
    }
    info["runs"], info["run_seconds"] = run_totals(root, profile)
    info["stand_ins"] = stand_ins(root, profile)
    return info


def stand_ins(root: Path, profile: str) -> dict[str, int]:
    """Llama3-8B runs that had no real checkpoint or tokenizer (summary.json's own fields): their
    times and memory are the model's shape's, their losses say nothing (run/llm/weights.py)."""
    out = {"random weights": 0, "byte tokenizer": 0}
    for path in store.runs_dir(profile, root).glob(f"llama3_8b-*/{store.SUMMARY}"):
        summ = store.read_json(path)
        out["random weights"] += summ.get("weights") == "random"
        out["byte tokenizer"] += summ.get("tokenizer") == "bytes"
    return {k: v for k, v in out.items() if v}


def run_totals(root: Path, profile: str) -> tuple[Counter, dict[str, float]]:
    """Runs by status, each run counted once however many experiments share it, and measured
    wall seconds per experiment (a shared run counts in each experiment that needs it)."""
    status: dict[str, str] = {}
    seconds: dict[str, float] = {}
    for sweep in sorted(store.sweeps_dir(profile, root).glob("*.json")):
        rec = store.read_json(sweep)
        for entry in rec.get("runs", []):
            s = store.run_dir(profile, entry["run"], root) / store.SUMMARY
            if s.is_file():
                summ = store.read_json(s)
                status[entry["run"]] = summ.get("status", "?")
                wall = summ.get("launch_wall_s") or summ.get("total_time_s") or 0.0
                seconds[sweep.stem] = seconds.get(sweep.stem, 0.0) + float(wall)
    return Counter(status.values()), seconds


def artifact_meta(root: Path, profile: str, target: str) -> dict[str, Any] | None:
    path = store.tables_dir(profile, root) / f"{target}.json"
    return json.loads(path.read_text()) if path.is_file() else None


# ---------------------------------------------------------------- the compact table, side by side
def side_by_side(metas: list[dict[str, Any] | None], labels: list[str]) -> dict[str, Any] | None:
    """Keys, then per value column: the paper's, then each machine's (medians; min-max if any)."""
    base = next((m for m in metas if m and m.get("compact") is not None), None)
    if base is None:
        return None
    cols = base.get("compact_columns") or (list(base["compact"][0]) if base["compact"] else [])
    stats = {c for c in cols if c.endswith(("_min", "_max")) or c == "repeats"}
    keys = [k for k in base.get("keys", []) if k in cols] or cols[:1]
    values = [c for c in cols if c not in keys and c not in stats]
    sources: list[tuple[str, list[dict[str, Any]]]] = []
    if base.get("paper_compact"):
        sources.append(("paper", base["paper_compact"]))
    for m, label in zip(metas, labels, strict=True):
        sources.append((label, (m or {}).get("compact") or []))
    rows: dict[tuple, dict[str, str]] = {}
    for label, recs in sources:
        for r in recs:
            k = tuple(cell(r.get(key)) for key in keys)
            row = rows.setdefault(k, {})
            for v in values:
                text = cell(r.get(v))
                lo, hi = r.get(f"{v}_min"), r.get(f"{v}_max")
                if text and lo is not None and hi is not None and lo != hi:
                    text += f" ({cell(lo)}-{cell(hi)})"
                row[f"{v}|{label}"] = text
    many = len(sources) > 1
    names = [s for s, _ in sources]
    if names[1:] == labels[:1] and len(names) == 2:
        names = ["paper", "ours"]  # one machine: its label is on the first page
    head = [heading(k) for k in keys] + [
        f"{heading(v)}, {name}" if many else heading(v) for v in values for name in names
    ]
    body = [
        [*k, *(row.get(f"{v}|{label}", "") for v in values for label, _ in sources)]
        for k, row in rows.items()
    ]
    return {"columns": head, "rows": body, "sources": [s for s, _ in sources],
            "key_heads": [heading(k) for k in keys], "value_heads": [heading(v) for v in values],
            "names": names}  # fmt: skip


# ---------------------------------------------------------------- the whole report
def context(profile: str, roots: list[Path]) -> dict[str, Any]:
    matrix = mx.load_matrix()
    machines = [machine(r, profile) for r in roots]
    labels = [m["label"] for m in machines]
    if len(set(labels)) < len(labels):  # two folders from alike machines: tell them apart
        labels = [f"{m['label']} ({m['root']})" for m in machines]
    for m, label in zip(machines, labels, strict=True):
        m["label"] = label
    all_claims = [c for c in cs.load() if c["experiment"] in matrix["experiments"]]
    judged: list[dict[str, dict[str, Any]]] = [{} for _ in roots]
    sections = []
    targets = list(dict.fromkeys(e["target"] for e in matrix["experiments"].values()))
    for target in targets:
        exps = mx.experiments_for_target(target, matrix)
        entry = matrix["experiments"][exps[0]]
        metas = [artifact_meta(r, profile, target) for r in roots]
        implemented = (ARTIFACTS_DIR / f"{target.replace('-', '_')}.py").is_file()
        for i, meta in enumerate(metas):
            for c in (meta or {}).get("claims", []):
                judged[i][c["id"]] = c
        first = next((m for m in metas if m), None)
        fig = figures_dir(profile) / f"{target}.png"
        sections.append({
            "target": target,
            "experiments": exps,
            # the artifact's own title where it was built (a target over several experiments
            # may name itself), else the matrix's
            "title": (first or {}).get("title") or entry["title"],
            "source": entry["source"],
            "built": first is not None,
            "why": "" if first else (
                f"not built for this profile: run `make {target} PROFILE={profile}`"
                if implemented else "not implemented in this version of the artifact"),
            "notes": (first or {}).get("notes", []),
            "skipped": (first or {}).get("skipped", []),
            "csv": f"results/{profile}/tables/{target}.csv",
            "extra": (first or {}).get("extra", []),
            "paper_csv": (first or {}).get("paper_csv"),
            "figure": f"figures/{target}" if first and first.get("figure") and fig.is_file()
            else None,
            "table": side_by_side(metas, labels),
            "claims": [],
            "beyond": False,  # every claim of the section is ours: no published numbers
        })  # fmt: skip
    section_of = {e: s for s in sections for e in s["experiments"]}
    rows = []
    for c in all_claims:
        sec = section_of[c["experiment"]]
        per = []
        for i, meta_claims in enumerate(judged):
            got = meta_claims.get(c["id"])
            if got is None:
                why = (f"not implemented yet: {c['not_implemented']}" if c.get("not_implemented")
                       else sec["why"] or "not built")  # fmt: skip
                got = {"verdict": cl.UNMEASURED, "reason": why}
            per.append({**BLANK, **got, "machine": labels[i]})
        row = {"id": c["id"], "origin": cs.origin(c), "statement": c["statement"],
               "criterion": c["criterion"],
               "source": c["source"], "needs": c.get("needs", []), "per": per,
               "paper_verdict": next((p["paper_verdict"] for p in per if p["paper_verdict"]),
                                     ""),
               "target": sec["target"]}  # fmt: skip
        rows.append(row)
        sec["claims"].append(row)
    for sec in sections:
        sec["beyond"] = bool(sec["claims"]) and all(r["origin"] == cs.OURS for r in sec["claims"])
    # the papers' claims and ours (beyond the paper) are counted apart, never in one tally
    paper_rows = [r for r in rows if r["origin"] == cs.PAPER]
    our_rows = [r for r in rows if r["origin"] == cs.OURS]
    prof = matrix["profiles"][profile]
    return {
        "profile": profile,
        "profile_description": prof["description"].strip(),
        "profile_gpus": ", ".join(str(g) for g in prof["gpus"]),
        "paper_gpus": ", ".join(str(g) for g in matrix["profiles"].get("paper", prof)["gpus"]),
        "machines": machines,
        "labels": labels,
        "tally": tally(paper_rows, labels),
        "verdicts": VERDICT_ORDER,
        "n_claims": len(paper_rows),
        "claims": paper_rows,
        "our_tally": tally(our_rows, labels),
        "n_ours": len(our_rows),
        "our_claims": our_rows,
        "sections": sections,
        "built": sum(1 for s in sections if s["built"]),
        "cpu_only": all(m["hardware"] is None or "CPU" in m["label"] for m in machines),
        "assumptions": assumptions(matrix),
        "needs_text": NEEDS_TEXT,
    }


def tally(rows: list[dict[str, Any]], labels: list[str]) -> list[dict[str, Any]]:
    """Per machine, how many of `rows` got each verdict."""
    return [{"machine": label,
             "counts": {v: sum(1 for r in rows if r["per"][i]["verdict"] == v)
                        for v in VERDICT_ORDER}}
            for i, label in enumerate(labels)]  # fmt: skip


BLANK = {"reason": "", "evidence": "", "coverage": "", "paper_verdict": "", "paper_evidence": "",
         "in_paper_range": None, "paper_range": None}  # fmt: skip
NEEDS_TEXT = {
    "gpu": "a GPU",
    "gpu_oom": "a GPU that can run out of memory",
    "learned": "runs that learn",
    "learned_scenario_b": "Scenario B runs that learn",
    "paper_data": "the paper's MNIST",
    "multi_numa": "two or more NUMA nodes",
    "records_cuda_event_destroy": "a profiler that records cudaEventDestroy (nsys)",
    "htod": "a GPU (bytes copied host-to-device)",
    "dali_gpu": "a GPU for DALI's mixed decoding",
    "large_images": "images large enough for a 100x cut (81 px or more)",
    "eight_bit_states": "adapters large enough for 8-bit optimizer states (4,096 elements or more)",
}


def assumptions(matrix: dict[str, Any]) -> list[dict[str, str]]:
    out = []
    for a in yaml.safe_load(ASSUMPTIONS.read_text())["assumptions"]:
        value: Any = None
        if a.get("value_from"):
            value = matrix
            for part in a["value_from"].split("."):
                value = value.get(part) if isinstance(value, dict) else None
            if value is None:  # a matrix without that entry (tests' own)
                continue
        text = a.get("value_text", "{value}").format(value=value)
        out.append({"setting": a["setting"], "value": text, "why": " ".join(a["why"].split())})
    return out


def render(profile: str, roots: list[Path], out_dir: Path | None = None) -> list[Path]:
    out_dir = out_dir or OUT_DIR / profile
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        comment_start_string="{##",  # LaTeX's {#1} is not a comment
        comment_end_string="##}",
    )
    env.filters["tex"] = tex
    env.filters["texpath"] = texpath
    env.filters["duration"] = duration
    ctx = context(profile, roots)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name in ("report.md", "report.tex"):
        text = env.get_template(f"{name}.j2").render(**ctx)
        store.write_text_atomic(out_dir / name, text)
        written.append(out_dir / name)
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--profile", required=True)
    ap.add_argument("--results", action="append", type=Path,
                    help="a results folder (repeat for several machines); default: RESULTS_DIR")  # fmt: skip
    args = ap.parse_args(argv)
    if args.profile not in mx.profiles():
        print(f"error: unknown profile '{args.profile}'", file=sys.stderr)
        return 2
    roots = args.results or [store.RESULTS_ROOT]
    for r in roots:
        if not store.profile_dir(args.profile, r).is_dir():
            print(f"error: {store.profile_dir(args.profile, r)} has no results: run "
                  f"`make all PROFILE={args.profile}` there first", file=sys.stderr)  # fmt: skip
            return 2
    for path in render(args.profile, roots):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
