"""L9 (J Fig.17): bytes moved per direction (HtoD, DtoD, DtoH) by template and method.

One row per (run, metric) (analysis/profiles/artifact.py): the three memcpy directions with their
bytes, and labelled CPU stand-ins (host copies) on CPU runs. The paper printed no numbers for this
figure: there is no paper() table and no self-check.
"""

from __future__ import annotations

import textwrap

import matplotlib.pyplot as plt
import pandas as pd

from analysis import draw, draw_profile
from analysis.profiles import artifact as pa
from analysis.profiles.metrics import MEMCPY_METRICS
from run.llm.spec import METHODS, TEMPLATE_DATASETS

KEYS = ["method", "template"]
# the paper's order
DIRECTION_NAMES = {"memcpy_htod": "HtoD", "memcpy_dtod": "DtoD", "memcpy_dtoh": "DtoH"}
DIRECTIONS = list(DIRECTION_NAMES)
NAMES = {m: f"{n} [MB]" for m, n in DIRECTION_NAMES.items()}
MB = 1e6


def build_table(runs: pd.DataFrame, tidy: pd.DataFrame) -> pd.DataFrame:
    t = pa.table(runs, tidy, ["dataset", "method", "gpus"], list(MEMCPY_METRICS), cpu=True)
    t = t.assign(o1=t["method"].map(METHODS.index), o2=t["dataset"].map(TEMPLATE_DATASETS.index))
    return t.sort_values(["o1", "o2", "kind"], kind="mergesort").drop(columns=["o1", "o2"])


def compact(t: pd.DataFrame) -> pd.DataFrame:
    """Megabytes moved per direction in the profiled window, per method and template."""
    return pa.by_method_template(t, DIRECTIONS, "bytes", NAMES, scale=1 / MB)


def title(runs: pd.DataFrame, t: pd.DataFrame) -> str:
    """Bytes per direction where a profile measured CUDA copies; on a CPU run, what it has."""
    rows = t[(t["kind"] == pa.PAPER) & t["metric"].isin(DIRECTIONS)] if len(t) else t
    if len(rows) and (rows["measured"].astype(str) == "True").any():
        return "Bytes moved per direction (CUDA memcpy) by template and method"
    return "Host copy time (aten::copy_; no CUDA copies, so no bytes) by template and method"


CONDITIONS = ["method", "dataset"]
HOST_COPY = "aten::copy_ (host copies)"


def _rows(df: pd.DataFrame) -> tuple[pd.DataFrame, bool]:
    """(rows drawn with `series` and `value`, whether they are bytes of CUDA copies)."""
    ok = df[df["status"] == "ok"]
    measured = ok["measured"].astype(str) == "True"
    paper = ok[(ok["kind"] == "paper metric") & measured & ok["metric"].isin(DIRECTIONS)]
    if len(paper):
        mb = pd.to_numeric(paper["bytes"], errors="coerce") / MB
        return paper.assign(series=paper["metric"].map(DIRECTION_NAMES), value=mb), True
    cpu = ok[(ok["kind"] == "cpu op") & (ok["metric"].astype(str) == "cpu:aten::copy_")]
    return cpu.assign(series=HOST_COPY, value=pd.to_numeric(cpu["total_s"])), False


def _series(df: pd.DataFrame) -> list[str]:
    rows, _ = _rows(df)
    return [s for s in [*DIRECTION_NAMES.values(), HOST_COPY] if s in set(rows["series"])]


def figure(df: pd.DataFrame, meta: dict) -> plt.Figure:
    ok = df[df["status"] == "ok"].copy()
    ok["cond"] = draw_profile.condition_label(ok, draw_profile.all_conditions(ok, CONDITIONS))
    rows, copies = _rows(ok)
    groups = list(dict.fromkeys(ok["cond"]))
    fig, ax = plt.subplots(figsize=(max(7.0, 0.85 * len(groups) + 2), 3.8))
    if len(rows):
        wide = rows.groupby(["cond", "series"], sort=False)["value"].median().unstack("series")
        wide = wide.reindex(index=groups, columns=_series(df))
        zero = wide.map(lambda v: "0" if v == 0 else "")  # no bar for a 0 on a log axis: say it
        draw.bars(ax, wide, log=copies, marks=zero)
        ax.tick_params(axis="x", labelsize=7)
        draw.legend(ax)
    notes = [
        draw_profile.not_run_note(
            df[df["status"] != "ok"], draw_profile.all_conditions(ok, CONDITIONS)
        )
    ]
    if copies:
        ax.set_ylabel("moved in the window, summed over ranks [MB]")
        title = "CUDA memcpy: bytes moved per direction"
    else:
        ax.set_ylabel("aten::copy_ time, summed over ranks [s]")
        title = "Host copies (aten::copy_ time, not bytes)"
        notes.insert(
            0, f"Bytes per direction: {draw_profile.NOT_MEASURED} (a CPU run makes no CUDA memcpy)."
        )
    text = "\n".join(textwrap.fill(n, 120) for n in notes if n)
    fig.text(0.01, 0.0, text, fontsize=7, color="darkred", va="top")
    fig.suptitle(f"{title}, by template and method\n{draw.subtitle(meta)}", fontsize=10)
    fig.tight_layout()
    return fig


ARTIFACT = draw_profile.artifact(
    build_table, compact=compact, keys=KEYS, title=title, figure=figure
)
