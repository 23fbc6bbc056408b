"""The one driver of every artifact: `python -m analysis TARGET --scale P [--figure]`.

An artifact is one module, `analysis/artifacts/<target with _>.py`, that ends in
`ARTIFACT = Artifact(...)` (the dataclass below): its table, the report's compact table, the
paper's numbers, notes, gates, side tables, title and, for a fig-* target, its figure. The driver
reads those fields and nothing else of the module.

The experiments behind a target come from experiments/matrix.yaml (its `target:` fields) and
the claims from reference/paper/claims.yaml (their `experiment:`): nothing else maps them.
Writes results/<scale>/tables/<target>.csv and .json (title, claims with verdicts, compact
tables of ours and the paper's, notes, skipped cells); with --figure, the figure drawn from
those two files into the report's figures folder (PNG and PDF).
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from analysis import common as c
from analysis import noise
from analysis.claims import spec as cs
from analysis.claims import verdicts as cl
from run import store
from run.program import program
from run.sweep import matrix as mx

ARTIFACTS_DIR = Path(__file__).parent / "artifacts"


def module_name(target: str) -> str:
    return f"analysis.artifacts.{target.replace('-', '_')}"


Runs = pd.DataFrame  # one row per run of the target's experiments (attrs: scale, left_out)
Table = pd.DataFrame  # the tidy per-run table, written as <target>.csv


@dataclass(frozen=True)
class Artifact:
    """Everything one make target makes; every field but the first two may be left out.

    table(runs, scale)   the tidy per-run table (`runs.attrs["scale"]` names the scale,
                           for fields that read a run's own files)
    compact(t)             the report's table, keyed and pivoted as the paper's; applied to
                           paper() too; `keys` are its key columns
    paper()                the paper's published numbers in table()'s shape (None: it printed
                           none); `paper_csv` the reference CSV they come from
    notes(runs, t)         what a reader must know
    gates(runs, t)         claims.yaml's `gates:` names -> why not met ("" when met); `gpu` is
                           added by the driver where the runs had no GPU
    extra(runs, t)         side tables, written as <target>-<name>.csv
    title                  the section's title, or title(runs, t) where it depends on what the
                           runs measured (VRAM or host RSS); default: the matrix's title
    figure(t, meta)        the figure (fig-* targets only), drawn from the CSV and the JSON alone
    """

    table: Callable[[Runs, str], Table]
    compact: Callable[[Table], pd.DataFrame]
    keys: Sequence[str] = ()
    paper: Callable[[], Table | None] | None = None
    paper_csv: str | None = None
    notes: Callable[[Runs, Table], list[str]] | None = None
    gates: Callable[[Runs, Table], Mapping[str, str]] | None = None
    extra: Callable[[Runs, Table], Mapping[str, pd.DataFrame]] | None = None
    title: str | Callable[[Runs, Table], str] | None = None
    figure: Callable[[Table, dict[str, Any]], Any] | None = None


def load(target: str) -> Artifact | None:
    """The target's Artifact, or None when this version does not implement it."""
    if not (ARTIFACTS_DIR / f"{target.replace('-', '_')}.py").is_file():
        return None
    art = getattr(importlib.import_module(module_name(target)), "ARTIFACT", None)
    if not isinstance(art, Artifact):
        raise c.AnalysisError(f"{module_name(target)} has no ARTIFACT = Artifact(...)")
    if (art.figure is not None) != target.startswith("fig-"):
        raise c.AnalysisError(f"{target}: a fig-* target draws a figure, a table-* one none")
    return art


def targets(matrix: dict[str, Any] | None = None) -> list[str]:
    """Every make target of the matrix, in its order."""
    matrix = matrix or mx.load_matrix()
    return list(dict.fromkeys(e["target"] for e in matrix["experiments"].values()))


def paper_gpus(exps: list[str]) -> list[int]:
    """The GPU counts the paper ran for these experiments (the paper scale of the matrix)."""
    if "paper" not in mx.scales():  # a test matrix may have none
        return []
    return sorted({int(s["gpus"]) for e in exps for s in mx.expand(e, "paper").specs})


def runs_of(exps: list[str], scale: str) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """The experiments' runs, each once; attrs["left_out"] names the unreadable ones and
    attrs["not_run"] the experiments of a several-experiment target that have no sweep record
    where another has one (a reference folder from a GPU lent for minutes: O1 without O2-O4)."""
    recorded = [e for e in exps if store.sweep_file(scale, e).exists()]
    not_run = [e for e in exps if recorded and e not in recorded]
    frames, skipped, bad = [], [], []
    for e in (e for e in exps if e not in not_run):
        df, sk = c.experiment_runs(e, scale)
        frames.append(df)
        skipped.extend(sk)
        bad.extend(r for r in df.attrs.get("left_out", []) if r not in bad)
    runs = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    runs = runs.drop_duplicates("run") if "run" in runs else runs
    runs.attrs["scale"] = scale  # for hooks that read run files beside the summaries
    runs.attrs["left_out"] = bad
    runs.attrs["not_run"] = not_run
    return runs, skipped


def default_gates(runs: pd.DataFrame) -> dict[str, str]:
    gates: dict[str, str] = {}
    if not c.on_gpu(runs):
        gates["gpu"] = cl.NO_GPU
    return gates


def records(df: pd.DataFrame | None) -> list[dict[str, Any]] | None:
    if df is None:
        return None
    return [{k: (None if pd.isna(v) else v) for k, v in r.items()} for r in df.to_dict("records")]


def build(target: str, scale: str) -> Path:
    matrix = mx.load_matrix()
    exps = mx.experiments_for_target(target, matrix)
    art = load(target)
    if art is None:
        raise c.AnalysisError(f"{target} is not implemented in this version of the artifact")
    runs, skipped = runs_of(exps, scale)
    bad = runs.attrs.get("left_out", [])
    if runs.empty and bad:  # an artifact's table needs at least one run's columns
        raise c.AnalysisError(
            f"{target}: every run is unreadable ({', '.join(bad)}): rerun its sweep, `python "
            f"-m run.sweep --scale {scale} {' '.join(f'--exp {e}' for e in exps)}`"
        )
    t = art.table(runs, scale)
    paper = art.paper() if art.paper else None
    gates = {**default_gates(runs), **(art.gates(runs, t) if art.gates else {})}
    gates = {k: v for k, v in gates.items() if v}
    # each claim beside its own experiment's GPU counts (fig-optimized's O1 runs 4, O3 1 and 4),
    # its comparisons against the run-to-run spread of its quantity measured in these results
    # (every set of runs that did identical work), a CPU run's verdict labelled as a stand-in
    floor = noise.measure(scale, matrix)
    stand_in = bool(len(runs)) and not c.on_gpu(runs)
    judged = []
    for claim in cs.for_experiments(exps):
        workload = matrix["experiments"][claim["experiment"]]["workload"]
        judged.append(cl.judge(claim, t, paper, gates, paper_gpus([claim["experiment"]]),
                               floor, "", workload, stand_in))  # fmt: skip
    compact = art.compact(t)
    out = store.tables_dir(scale) / f"{target}.csv"
    out.parent.mkdir(parents=True, exist_ok=True)
    store.write_text_atomic(out, t.to_csv(index=False))
    extra = art.extra(runs, t) if art.extra else {}
    for name, df in extra.items():
        store.write_text_atomic(out.with_name(f"{target}-{name}.csv"), df.to_csv(index=False))
    entry = matrix["experiments"][exps[0]]
    notes = list(art.notes(runs, t)) if art.notes else []
    if bad:
        notes.append(f"{len(bad)} run(s) left out, their files unreadable: {', '.join(bad)}; "
                     "the next sweep runs them again")  # fmt: skip
    not_run = runs.attrs.get("not_run")  # absent from a frame a test hands in
    if not_run:
        notes.append(f"not run in these results (no sweep record): {', '.join(not_run)}; their "
                     "claims are not measured here")  # fmt: skip
    meta = {
        "target": target,
        "scale": scale,
        "experiments": exps,
        # a target over experiments of different titles (fig-optimized) names itself; one whose
        # quantity differs by machine (VRAM on a GPU, host RSS on a CPU) names what it measured
        "title": art.title(runs, t) if callable(art.title) else art.title or entry["title"],
        "source": entry["source"],
        "columns": list(t.columns),
        "claims": judged,
        "notes": notes,
        "left_out": bad,
        "paper_csv": art.paper_csv,
        "compact": records(compact),
        "paper_compact": records(art.compact(paper)) if paper is not None else None,
        "keys": list(art.keys),
        "compact_columns": list(compact.columns),
        "skipped": skipped,
        "figure": art.figure is not None,
        "extra": [f"{target}-{name}.csv" for name in extra],
        "gates": gates,
        "generated": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    }
    store.write_json_atomic(out.with_suffix(".json"), meta)
    return out


def draw(target: str, scale: str) -> Path:
    """The target's figure, drawn from the CSV and JSON build() wrote (never from the runs)."""
    art = load(target)
    if art is None or art.figure is None:
        raise c.AnalysisError(f"{target} draws no figure")
    from analysis import draw as figures  # matplotlib: only where a figure is drawn (0.8 CPU-s)

    t, meta = figures.load(target, scale)
    return figures.save(art.figure(t, meta), target, scale)


def self_check() -> list[dict[str, Any]]:
    """Every claim of the papers judged on their own numbers alone (the published tables and
    quotes); our own claims (origin: ours) have no published numbers and are left out."""
    matrix = mx.load_matrix()
    out = []
    for target in targets(matrix):
        exps = mx.experiments_for_target(target, matrix)
        art = load(target)
        paper = art.paper() if art is not None and art.paper else None
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
    ap.add_argument("--scale", help="required but for self-check")
    ap.add_argument("--figure", action="store_true", help="draw the figure from the built table")
    args = ap.parse_args(argv)
    if args.target == "self-check":
        res = self_check()
        decided = [r for r in res if r["verdict"] in (cl.HOLDS, cl.FAILS, cl.INCONCLUSIVE)]
        for r in decided:
            print(f"{r['id']:5} {r['verdict']:14} {r['evidence'][:110]}")
        print(f"{len(decided)} of {len(res)} claims decided by the paper's own numbers")
        return 0
    if not args.scale:
        raise c.AnalysisError("--scale is required")
    if args.target not in targets():
        raise c.AnalysisError(f"unknown target '{args.target}': one of {', '.join(targets())}")
    print(f"wrote {(draw if args.figure else build)(args.target, args.scale)}")
    return 0
