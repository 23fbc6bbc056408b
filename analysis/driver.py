"""The one driver of every artifact: `python -m analysis TARGET --profile P [--figure]`.

An artifact is one module, `analysis/artifacts/<target with _>.py`, which provides

    table(runs, profile) -> DataFrame     the tidy per-run table (written as the CSV)
    compact(t) -> DataFrame               the report's table, keyed and pivoted as the paper's
    paper() -> DataFrame | None           the paper's published numbers in `table`'s shape
    notes(runs, t) -> list[str]           what a reader must know (optional)
    gates(runs, t) -> dict[str, str]      failing gates of claims.yaml (`needs:`), with reasons
    extra(runs, t) -> dict[str, DataFrame] side tables, written as <target>-<name>.csv (optional)
    figure(t, meta) -> Figure             the figure, drawn from the CSV and JSON alone (fig-*)
    (`runs.attrs["profile"]` names the profile, for hooks that read a run's own files)
    PAPER_CSV, FIGURE                     the reference CSV it sets ours beside; draws a figure
    TITLE                                 the section's title (optional; default: the first
                                          experiment's title in the matrix)
    title(runs, t) -> str                 the title, where it depends on what the runs measured
                                          (VRAM or host RSS, CUDA calls or CPU ops; optional)

The experiments behind a target come from experiments/matrix.yaml (its `target:` fields) and
the claims from reference/paper/claims.yaml (their `experiment:`): nothing else maps them.
Writes results/<profile>/tables/<target>.csv and .json (title, claims with verdicts, compact
tables of ours and the paper's, notes, skipped cells); with --figure, the figure drawn from
those two files into the report's figures folder (PNG and PDF).
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
from pathlib import Path
from types import ModuleType
from typing import Any

import pandas as pd

from analysis import common as c
from analysis import draw as figures
from analysis import noise
from analysis.claims import spec as cs
from analysis.claims import verdicts as cl
from run import store
from run.program import program
from run.sweep import matrix as mx

ARTIFACTS_DIR = Path(__file__).parent / "artifacts"


def module_name(target: str) -> str:
    return f"analysis.artifacts.{target.replace('-', '_')}"


def artifact(target: str) -> ModuleType | None:
    """The artifact's module, or None when this version does not implement it."""
    if not (ARTIFACTS_DIR / f"{target.replace('-', '_')}.py").is_file():
        return None
    return importlib.import_module(module_name(target))


def targets(matrix: dict[str, Any] | None = None) -> list[str]:
    """Every make target of the matrix, in its order."""
    matrix = matrix or mx.load_matrix()
    return list(dict.fromkeys(e["target"] for e in matrix["experiments"].values()))


def paper_gpus(exps: list[str]) -> list[int]:
    """The GPU counts the paper ran for these experiments (the paper profile of the matrix)."""
    if "paper" not in mx.profiles():  # a test matrix may have none
        return []
    return sorted({int(s["gpus"]) for e in exps for s in mx.expand(e, "paper").specs})


def runs_of(exps: list[str], profile: str) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """The experiments' runs, each once; attrs["left_out"] names the unreadable ones."""
    frames, skipped, bad = [], [], []
    for e in exps:
        df, sk = c.experiment_runs(e, profile)
        frames.append(df)
        skipped.extend(sk)
        bad.extend(r for r in df.attrs.get("left_out", []) if r not in bad)
    runs = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    runs = runs.drop_duplicates("run") if "run" in runs else runs
    runs.attrs["profile"] = profile  # for hooks that read run files beside the summaries
    runs.attrs["left_out"] = bad
    return runs, skipped


def left_out_note(bad: list[str]) -> list[str]:
    if not bad:
        return []
    return [
        f"{len(bad)} run(s) left out, their files unreadable: {', '.join(bad)}; the next sweep "
        "runs them again"
    ]


def default_gates(runs: pd.DataFrame) -> dict[str, str]:
    gates: dict[str, str] = {}
    if not c.on_gpu(runs):
        gates["gpu"] = cl.NO_GPU
    return gates


def records(df: pd.DataFrame | None) -> list[dict[str, Any]] | None:
    if df is None:
        return None
    return [{k: (None if pd.isna(v) else v) for k, v in r.items()} for r in df.to_dict("records")]


def build(target: str, profile: str) -> Path:
    matrix = mx.load_matrix()
    exps = mx.experiments_for_target(target, matrix)
    mod = artifact(target)
    if mod is None:
        raise c.AnalysisError(f"{target} is not implemented in this version of the artifact")
    runs, skipped = runs_of(exps, profile)
    bad = runs.attrs.get("left_out", [])
    if runs.empty and bad:  # an artifact's table needs at least one run's columns
        raise c.AnalysisError(
            f"{target}: every run is unreadable ({', '.join(bad)}): rerun its sweep, `python "
            f"-m run.sweep --profile {profile} {' '.join(f'--exp {e}' for e in exps)}`"
        )
    t = mod.table(runs, profile)
    paper = mod.paper() if hasattr(mod, "paper") else None
    gates = {**default_gates(runs), **(mod.gates(runs, t) if hasattr(mod, "gates") else {})}
    gates = {k: v for k, v in gates.items() if v}
    # each claim beside its own experiment's GPU counts (fig-optimized's O1 runs 4, O3 1 and 4),
    # its comparisons against the run-to-run spread of its quantity measured in these results
    # (every set of runs that did identical work), a CPU run's verdict labelled as a stand-in
    floor = noise.measure(profile, matrix)
    stand_in = bool(len(runs)) and not c.on_gpu(runs)
    judged = []
    for claim in cs.for_experiments(exps):
        workload = matrix["experiments"][claim["experiment"]]["workload"]
        judged.append(cl.judge(claim, t, paper, gates, paper_gpus([claim["experiment"]]),
                               floor, "", workload, stand_in))  # fmt: skip
    compact = mod.compact(t)
    out = store.tables_dir(profile) / f"{target}.csv"
    out.parent.mkdir(parents=True, exist_ok=True)
    store.write_text_atomic(out, t.to_csv(index=False))
    extra = mod.extra(runs, t) if hasattr(mod, "extra") else {}
    for name, df in extra.items():
        store.write_text_atomic(out.with_name(f"{target}-{name}.csv"), df.to_csv(index=False))
    entry = matrix["experiments"][exps[0]]
    meta = {
        "target": target,
        "profile": profile,
        "experiments": exps,
        # a target over experiments of different titles (fig-optimized) names itself; one whose
        # quantity differs by machine (VRAM on a GPU, host RSS on a CPU) names what it measured
        "title": mod.title(runs, t)
        if hasattr(mod, "title")
        else getattr(mod, "TITLE", entry["title"]),
        "source": entry["source"],
        "columns": list(t.columns),
        "claims": judged,
        "notes": [
            *(mod.notes(runs, t) if hasattr(mod, "notes") else []),
            *left_out_note(bad),
        ],
        "left_out": bad,
        "paper_csv": getattr(mod, "PAPER_CSV", None),
        "compact": records(compact),
        "paper_compact": records(mod.compact(paper)) if paper is not None else None,
        "keys": list(getattr(mod, "KEYS", [])),
        "compact_columns": list(compact.columns),
        "skipped": skipped,
        "figure": bool(getattr(mod, "FIGURE", False)),
        "extra": [f"{target}-{name}.csv" for name in extra],
        "gates": gates,
        "generated": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    }
    store.write_json_atomic(out.with_suffix(".json"), meta)
    return out


def draw(target: str, profile: str) -> Path:
    """The target's figure, drawn from the CSV and JSON build() wrote (never from the runs)."""
    mod = artifact(target)
    if mod is None or not hasattr(mod, "figure"):
        raise c.AnalysisError(f"{target} draws no figure")
    t, meta = figures.load(target, profile)
    return figures.save(mod.figure(t, meta), target, profile)


def self_check() -> list[dict[str, Any]]:
    """Every claim of the papers judged on their own numbers alone (the published tables and
    quotes); our own claims (origin: ours) have no published numbers and are left out."""
    matrix = mx.load_matrix()
    out = []
    for target in targets(matrix):
        exps = mx.experiments_for_target(target, matrix)
        mod = artifact(target)
        paper = mod.paper() if mod is not None and hasattr(mod, "paper") else None
        gpus = paper_gpus(exps)
        out.extend(
            cl.judge(claim, paper, None, {}, gpus)
            for claim in cs.for_experiments(exps)
            if cs.origin(claim) == cs.PAPER
        )
    return out


@program("the table is written whole or not at all")
def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m analysis", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("target", help="a make target of experiments/matrix.yaml, e.g. fig-vram")
    ap.add_argument("--profile", help="required but for self-check")
    ap.add_argument("--figure", action="store_true", help="draw the figure from the built table")
    args = ap.parse_args(argv)
    if args.target == "self-check":
        res = self_check()
        decided = [r for r in res if r["verdict"] in (cl.HOLDS, cl.FAILS, cl.INCONCLUSIVE)]
        for r in decided:
            print(f"{r['id']:5} {r['verdict']:14} {r['evidence'][:110]}")
        print(f"{len(decided)} of {len(res)} claims decided by the paper's own numbers")
        return 0
    if not args.profile:
        raise c.AnalysisError("--profile is required")
    if args.target not in targets():
        raise c.AnalysisError(f"unknown target '{args.target}': one of {', '.join(targets())}")
    print(f"wrote {(draw if args.figure else build)(args.target, args.profile)}")
    return 0
