"""Render the report (Markdown and LaTeX) from results alone, one column per machine.

    python -m report.build --scale smoke                       # this machine's results/
    python -m report.build --scale paper --results results --results results/reference/h100

Writes report.md and report.tex to report/out/<scale>, or for a RESULTS_DIR other than the
checkout's results/ to <RESULTS_DIR>/<scale>/report (run.store.report_dir); refuses
tables that record another scale than the one asked for. Reads only the artifacts' tables
(results/<scale>/tables/*.json, written by `python -m analysis`), the runs' specs, provenance
and summaries (report/settings.py: what ran), the claims (reference/paper/claims.yaml), the
assumptions and the matrix; the one thing it asks for is the next scale's plan
(report/nextgpu.py, `python -m run.sweep.plan`, torch-free). It computes nothing the analysis did
not write, so it runs on a laptop.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path
from typing import Any

import jinja2
import yaml

from analysis.claims import spec as cs
from analysis.claims import verdicts as cl
from analysis.driver import ARTIFACTS_DIR
from report import inputs, nextgpu, settings
from report.tables import intro, side_by_side
from report.wording import (
    hoisted,
    margin_text,
    noise_floor,
    run_links,
    sentence,
    short_reason,
    skipped_by_reason,
    timing_short,
)
from run import store
from run.program import program
from run.sweep import matrix as mx

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
ASSUMPTIONS = ROOT / "experiments" / "assumptions.yaml"
TEX_ESCAPES = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
               "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}",
               "^": r"\textasciicircum{}"}  # fmt: skip


def tex(value: Any) -> str:
    """Text escaped for LaTeX; `code` (Markdown's, in notes and reasons) in typewriter type."""
    text = "".join(TEX_ESCAPES.get(ch, ch) for ch in str(value))
    return re.sub(r"`([^`]+)`", r"\\texttt{\1}", text)


def texpath(value: Any) -> str:
    """A path or run name in typewriter type that may break after /, - and _ (a long one would
    run off the page: \\texttt never hyphenates)."""
    return (
        tex(value)
        .replace("/", "/\\allowbreak{}")
        .replace("-", "-\\allowbreak{}")
        .replace("\\_", "\\_\\allowbreak{}")
    )


def duration(seconds: float | None) -> str:
    """Wall time in the unit that reads best: s under 2 min, min under 2 h, else h."""
    if not seconds:
        return "-"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


# ---------------------------------------------------------------- one results folder = one machine
def machine(root: Path, scale: str) -> dict[str, Any]:
    """Where one results folder's numbers came from: the newest run's provenance."""
    provs = sorted(store.runs_dir(scale, root).glob(f"*/{store.PROVENANCE}"),
                   key=lambda p: p.stat().st_mtime, reverse=True)  # fmt: skip
    info: dict[str, Any] = {"root": str(root), "label": str(root), "hardware": None}
    for path in provs:  # the newest readable one: a corrupt run says nothing of the machine
        prov = _readable(path)
        if prov and isinstance(prov.get("hardware"), dict):
            break
    else:
        return info
    summary = store.read_summary(path.parent) or {}
    runtime = summary.get("runtime")
    hw = prov["hardware"]
    gpus = f"{hw['gpu_count']} x {hw['gpu_model']}" if hw["gpu_count"] else "CPU (gloo ranks)"
    info["label"] = gpus if hw["gpu_count"] else f"{gpus}, {hw['cpu_count']} cores"
    info["hardware"] = {
        "git": prov["git"],
        "versions": {k: v for k, v in prov["versions"].items() if v},
        "runtime": runtime or {},
        "python": hw.get("python") or "",
        "nsys_version": hw.get("nsys_version") or "",
        "cpu": f"{hw['cpu_count']} x {hw['cpu_model']}",
        "gpus": gpus,
        "numa_nodes": len(hw["numa_nodes"]),
        "numactl": hw["numactl"] or "not found",
        "nsys": hw["nsys"] or "not found",
        "host": hw["hostname"],
    }
    info["stand_ins"] = stand_ins(root, scale)
    return info


def stand_ins(root: Path, scale: str) -> dict[str, int]:
    """Llama3-8B runs that had no real checkpoint or tokenizer (summary.json's own fields): their
    times and memory are the model's shape's, their losses say nothing (run/llm/weights.py)."""
    out = {"random weights": 0, "byte tokenizer": 0}
    for path in store.runs_dir(scale, root).glob(f"llama3_8b-*/{store.SUMMARY}"):
        summ = store.read_summary(path.parent) or {}
        out["random weights"] += summ.get("weights") == "random"
        out["byte tokenizer"] += summ.get("tokenizer") == "bytes"
    return {k: v for k, v in out.items() if v}


def _readable(path: Path) -> dict[str, Any] | None:
    """A results JSON file, or None (named on stderr) when it cannot be read as an object."""
    try:
        got = store.read_json(path)
    except (OSError, ValueError) as exc:
        print(f"warning: {path}: unreadable ({exc.__class__.__name__}), left out", file=sys.stderr)
        return None
    return got if isinstance(got, dict) else None


# ---------------------------------------------------------------- the whole report
def context(scale: str, roots: list[Path], out_dir: Path) -> dict[str, Any]:
    matrix = mx.load_matrix()
    machines = [machine(r, scale) for r in roots]
    labels = [m["label"] for m in machines]
    if len(set(labels)) < len(labels):  # two folders from alike machines: tell them apart
        labels = [f"{m['label']} ({m['root']})" for m in machines]
    for m, label in zip(machines, labels, strict=True):
        m["label"] = label
    claim_specs = {c["id"]: c for c in cs.load() if c["experiment"] in matrix["experiments"]}
    judged: list[dict[str, dict[str, Any]]] = [{} for _ in roots]
    gates: list[dict[str, dict[str, str]]] = [{} for _ in roots]
    sections = []
    ran = settings.what_ran(scale, roots, matrix)
    # a folder whose runs name no machine (no readable provenance) states no run totals
    first_ran = (
        ran["machines"][0] if machines[0]["hardware"] else {"run_counts": {}, "run_seconds": {}}
    )
    targets = list(dict.fromkeys(e["target"] for e in matrix["experiments"].values()))
    for target in targets:
        exps = mx.experiments_for_target(target, matrix)
        entry = matrix["experiments"][exps[0]]
        paths = [store.tables_dir(scale, r) / f"{target}.json" for r in roots]
        metas = [_readable(p) if p.is_file() else None for p in paths]
        implemented = (ARTIFACTS_DIR / f"{target.replace('-', '_')}.py").is_file()
        for i, meta in enumerate(metas):
            for c in (meta or {}).get("claims", []):
                judged[i][c["id"]] = c
            if meta is not None:
                gates[i][target] = meta.get("gates") or {}
        first = next((m for m in metas if m), None)
        fig = store.figures_dir(scale) / f"{target}.png"
        table = side_by_side(metas, labels)
        csv_path = store.tables_dir(scale, roots[0]) / f"{target}.csv"
        sections.append({
            "target": target,
            "experiments": exps,
            # the artifact's own title where it was built (a target over several experiments
            # may name itself), else the matrix's
            "title": (first or {}).get("title") or entry["title"],
            "source": entry["source"],
            "built": first is not None,
            "why": "" if first else (
                f"not built for this scale: run `make {target} PROFILE={scale}`"
                if implemented else "not implemented in this version of the artifact"),
            "notes": (first or {}).get("notes", []),
            "skipped": skipped_by_reason((first or {}).get("skipped", [])),
            "csv": f"results/{scale}/tables/{target}.csv",
            "csv_href": os.path.relpath(csv_path, out_dir),
            "extra": (first or {}).get("extra", []),
            "figure": f"figures/{target}" if first and first.get("figure") and fig.is_file()
            else None,
            # a table of ours alone that a figure draws is in the CSV; one beside the paper's
            # numbers, or without a figure, is printed
            "table": table if table and not table["empty"] and (
                "paper" in table["sources"] or not (first or {}).get("figure") or not fig.is_file())
            else None,
            "table_in_csv": bool(table and not table["empty"]),
            "table_intro": intro(table, (first or {}).get("paper_csv"), False) if table else {},
            "no_values": bool(table and table["empty"]),
            "paper_csv": (first or {}).get("paper_csv") or "profiler_quotes.csv",
            "runs": sum(first_ran["run_counts"].get(e, 0) for e in exps),
            "seconds": sum(first_ran["run_seconds"].get(e, 0.0) for e in exps),
            "claims": [],
        })  # fmt: skip
    section_of = {e: s for s in sections for e in s["experiments"]}
    rows = []
    for c in claim_specs.values():
        sec = section_of[c["experiment"]]
        per = []
        for i, meta_claims in enumerate(judged):
            got = meta_claims.get(c["id"])
            if got is None:
                why = (f"not implemented yet: {c['not_implemented']}" if c.get("not_implemented")
                       else sec["why"] or "not built")  # fmt: skip
                got = {"verdict": cl.UNMEASURED, "reason": why}
            # a claim of no table (not built) counts where its machine's verdicts do
            got = {**BLANK, "stand_in": machines[i]["label"].startswith("CPU"), **got,
                   "machine": labels[i]}  # fmt: skip
            got["verdict_text"] = got.get("verdict_text") or got["verdict"]
            got["reason"] = short_reason(got["reason"], c, gates[i].get(sec["target"], {}))
            got["run_links"] = run_links(got.get("runs") or [], roots[i], scale, out_dir)
            got["margin_text"] = margin_text(got)
            got["timing_short"] = timing_short(got)
            per.append(got)
        row = {"id": c["id"], "origin": cs.origin(c), "statement": c["statement"],
               "criterion": c["criterion"], "claim": c, "experiment": c["experiment"],
               "source": c["source"], "per": per,
               "gates": gates_text(c),
               "paper_verdict": next((p["paper_verdict"] for p in per if p["paper_verdict"]),
                                     ""),
               "target": sec["target"]}  # fmt: skip
        rows.append(row)
        sec["claims"].append(row)
    for sec in sections:
        sec["beyond"] = bool(sec["claims"]) and all(r["origin"] == cs.OURS for r in sec["claims"])
        if sec["table"] and sec["beyond"]:
            sec["table_intro"] = intro(sec["table"], None, True)
    # the papers' claims and ours (beyond the paper) are counted apart, never in one tally
    paper_rows = [r for r in rows if r["origin"] == cs.PAPER]
    our_rows = [r for r in rows if r["origin"] == cs.OURS]
    prof = matrix["scales"][scale]
    notes = hoisted(sections)
    assumed = yaml.safe_load(ASSUMPTIONS.read_text())
    return {
        "scale": scale,
        "scale_description": prof["description"].strip(),
        "scale_gpus": ", ".join(str(g) for g in prof["gpus"]),
        "paper_gpus": ", ".join(str(g) for g in matrix["scales"].get("paper", prof)["gpus"]),
        "machines": machines,
        "labels": labels,
        "tally": tally(paper_rows, labels),
        "verdicts": cl.VERDICTS,
        "n_claims": len(paper_rows),
        "claims": paper_rows,
        "our_tally": tally(our_rows, labels),
        "n_ours": len(our_rows),
        "our_claims": our_rows,
        "sections": sections,
        "shared_notes": notes,
        "built": sum(1 for s in sections if s["built"]),
        "cpu_only": all(m["hardware"] is None or "CPU" in m["label"] for m in machines),
        "gpu_only": cs.GPU_ONLY,
        "stand_in": cl.STAND_IN,
        "noise": [noise_floor(r, scale) for r in roots],
        "what_ran": ran,
        "cpu_threads": ", ".join(
            str(t) for t in sorted({t for m in ran["machines"] for t in m["threads"]})
        ),
        "software": settings.software_rows(machines, assumed.get("paper_software", {})),
        "next": nextgpu.section(scale, roots[0], rows, gates[0], GATE_TEXT, matrix),
        "assumptions": assumptions(matrix, assumed),
    }


def tally(rows: list[dict[str, Any]], labels: list[str]) -> list[dict[str, Any]]:
    """Per machine, how many of `rows` got each verdict; verdicts of CPU ranks standing in for
    GPUs are counted in a row of their own, apart from GPU verdicts (a "does not hold" on a CPU
    is no refutation of a paper about H100s)."""
    out = []
    for i, label in enumerate(labels):
        for stand_in in (False, True):
            mine = [r for r in rows if bool(r["per"][i].get("stand_in")) == stand_in]
            if not mine:
                continue
            out.append({"machine": f"{label} ({cl.STAND_IN})" if stand_in else label,
                        "counts": {v: sum(1 for r in mine if r["per"][i]["verdict"] == v)
                                   for v in cl.VERDICTS}})  # fmt: skip
    return out


BLANK = {"reason": "", "evidence": "", "coverage": "", "paper_verdict": "", "paper_evidence": "",
         "in_paper_range": None, "paper_range": None, "verdict_text": "", "noise": "",
         "cells": "", "runs": [], "ours": "", "paper_value": "", "margin_pct": None,
         "margin_points": None, "gap_pct": None, "gap_points": None, "timing": "",
         "stand_in": False}  # fmt: skip
GATE_TEXT = {
    "gpu": "a GPU",
    "gpu_oom": "a GPU that can run out of memory",
    "learned": "runs that learn",
    "learned_scenario_b": "Scenario B runs that learn",
    "paper_data": "the paper's MNIST",
    "real_data": "the paper's LLM data sets (data_source: real)",
    "multi_numa": "two or more NUMA nodes",
    "records_cuda_event_destroy": "a profiler that records cudaEventDestroy (nsys)",
    "htod": "a GPU (bytes copied host-to-device)",
    "dali_gpu": "a GPU for DALI's mixed decoding",
    "large_images": "images large enough for a 100x cut (81 px or more)",
    "eight_bit_states": "adapters large enough for 8-bit optimizer states (4,096 elements or more)",
}


def gates_text(claim: dict[str, Any]) -> list[str]:
    """The gates of a claim, in words, each once ("a GPU" where a GPU of some kind is named)."""
    texts = list(dict.fromkeys(GATE_TEXT.get(n, n) for n in claim.get("gates") or []))
    return [t for t in texts if not any(o != t and o.startswith(t) for o in texts)]


def assumptions(matrix: dict[str, Any], assumed: dict[str, Any]) -> list[dict[str, str]]:
    out = []
    for a in assumed["assumptions"]:
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


def render(scale: str, roots: list[Path], out_dir: Path | None = None) -> list[Path]:
    out_dir = out_dir or store.report_dir(scale)
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
    env.filters["sentence"] = sentence
    ctx = context(scale, roots, out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name in ("report.md", "report.tex"):
        text = env.get_template(f"{name}.j2").render(**ctx)
        store.write_text_atomic(out_dir / name, text)
        written.append(out_dir / name)
    return written


@program("each file is written whole or not at all")
def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--scale", required=True)
    ap.add_argument("--results", action="append", type=Path,
                    help="a results folder (repeat for several machines); default: RESULTS_DIR")  # fmt: skip
    args = ap.parse_args(argv)
    for path in render(args.scale, inputs.checked_roots(args.scale, args.results)):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
