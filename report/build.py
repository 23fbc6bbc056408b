"""Render the report (Markdown and LaTeX) from the results tables alone.

    python -m report.build --profile smoke     # -> report/out/report.md, report/out/report.tex

Only reads results/<profile>/tables/*.csv|json, the runs' provenance and the paper's reference
CSVs; it computes nothing that the analysis did not already write, so it runs on a laptop.
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
import pandas as pd

from analysis.common import REFERENCE_DIR
from run import matrix as mx
from run import store

HERE = Path(__file__).resolve().parent
OUT_DIR = HERE / "out"
ANALYSIS_DIR = HERE.parent / "analysis"
TEX_ESCAPES = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}


def tex(value: Any) -> str:
    return "".join(TEX_ESCAPES.get(ch, ch) for ch in str(value))


def fmt(value: Any) -> str:
    """Numbers as a reader wants them in a table: 3 significant decimals, blanks for missing."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float):
        return f"{value:.2f}" if abs(value) < 1000 else f"{value:.0f}"
    return str(value)


def table(df: pd.DataFrame, drop: tuple[str, ...] = ("run",)) -> dict[str, Any]:
    df = df[[c for c in df.columns if c not in drop]]
    return {
        "columns": list(df.columns),
        "rows": [[fmt(v) for v in r] for r in df.itertuples(index=False)],
    }


def hardware(profile: str) -> dict[str, Any] | None:
    """Provenance of the newest run of the profile: where the numbers came from."""
    runs = sorted(
        store.runs_dir(profile).glob(f"*/{store.PROVENANCE}"), key=lambda p: p.stat().st_mtime
    )
    if not runs:
        return None
    prov = store.read_json(runs[-1])
    summary_path = runs[-1].parent / store.SUMMARY
    runtime = store.read_json(summary_path).get("runtime") if summary_path.is_file() else None
    hw = prov["hardware"]
    return {
        "git": prov["git"],
        "versions": {k: v for k, v in prov["versions"].items() if v},
        "runtime": runtime or {},
        "cpu": f"{hw['cpu_count']} x {hw['cpu_model']}",
        "gpus": f"{hw['gpu_count']} x {hw['gpu_model']}"
        if hw["gpu_count"]
        else "none (gloo ranks on CPU)",
        "numa_nodes": len(hw["numa_nodes"]),
        "numactl": hw["numactl"] or "not found",
        "nsys": hw["nsys"] or "not found",
        "host": hw["hostname"],
    }


def sections(profile: str) -> list[dict[str, Any]]:
    matrix = mx.load_matrix()
    by_target: dict[str, list[str]] = {}
    for exp_id, e in matrix["experiments"].items():
        by_target.setdefault(e["target"], []).append(exp_id)
    out = []
    for target, exps in by_target.items():
        entry = matrix["experiments"][exps[0]]
        sec: dict[str, Any] = {
            "target": target,
            "experiments": exps,
            "title": entry["title"],
            "source": entry["source"],
        }
        meta_path = store.tables_dir(profile) / f"{target}.json"
        if meta_path.is_file():
            meta = json.loads(meta_path.read_text())
            sec.update(meta, built=True)
            sec["table"] = table(pd.read_csv(meta_path.with_suffix(".csv")))
            sec["paper"] = None
            if meta.get("paper_csv"):
                sec["paper"] = table(pd.read_csv(REFERENCE_DIR / meta["paper_csv"]))
            fig = OUT_DIR / "figures" / f"{target}.png"
            sec["figure"] = f"figures/{target}" if meta.get("figure") and fig.is_file() else None
        else:
            implemented = (ANALYSIS_DIR / f"{target.replace('-', '_')}.py").is_file()
            sec["built"] = False
            sec["why"] = (
                f"not built for this profile: run `make {target} PROFILE={profile}`"
                if implemented
                else "not implemented in this version of the artifact"
            )
        out.append(sec)
    return out


def render(profile: str, out_dir: Path = OUT_DIR) -> list[Path]:
    secs = sections(profile)
    hw = hardware(profile)
    verdicts = Counter(c["verdict"] for s in secs if s.get("built") for c in s["claims"])
    ctx = {
        "profile": profile,
        "profile_description": mx.load_matrix()["profiles"][profile]["description"].strip(),
        "hardware": hw,
        "sections": secs,
        "verdicts": dict(verdicts),
        "built": sum(1 for s in secs if s.get("built")),
        "cpu_only": hw is not None and hw["gpus"].startswith("none"),
    }
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["tex"] = tex
    written = []
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in ("report.md", "report.tex"):
        text = env.get_template(f"{name}.j2").render(**ctx)
        store.write_text_atomic(out_dir / name, text)
        written.append(out_dir / name)
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--profile", required=True)
    args = ap.parse_args(argv)
    if args.profile not in mx.profiles():
        print(f"error: unknown profile '{args.profile}'", file=sys.stderr)
        return 2
    for path in render(args.profile):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
