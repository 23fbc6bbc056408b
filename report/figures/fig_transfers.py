"""L9: bytes moved per direction (HtoD, DtoD, DtoH) by template and method; on a CPU run, which
has no CUDA copy, the time of its host copies instead, titled and labelled as such."""

from __future__ import annotations

import textwrap

import matplotlib.pyplot as plt
import pandas as pd

from analysis import draw as common
from analysis.draw_profile import (
    NOT_MEASURED,
    all_conditions,
    condition_label,
    not_run_note,
)

TARGET = "fig-transfers"
CONDITIONS = ["method", "dataset"]
DIRECTIONS = {"memcpy_htod": "HtoD", "memcpy_dtod": "DtoD", "memcpy_dtoh": "DtoH"}  # paper's order
HOST_COPY = "aten::copy_ (host copies)"
MB = 1e6


def _rows(df: pd.DataFrame) -> tuple[pd.DataFrame, bool]:
    """(rows drawn with `series` and `value`, whether they are bytes of CUDA copies)."""
    ok = df[df["status"] == "ok"]
    measured = ok["measured"].astype(str) == "True"
    paper = ok[(ok["kind"] == "paper metric") & measured & ok["metric"].isin(list(DIRECTIONS))]
    if len(paper):
        mb = pd.to_numeric(paper["bytes"], errors="coerce") / MB
        return paper.assign(series=paper["metric"].map(DIRECTIONS), value=mb), True
    cpu = ok[(ok["kind"] == "cpu op") & (ok["metric"].astype(str) == "cpu:aten::copy_")]
    return cpu.assign(series=HOST_COPY, value=pd.to_numeric(cpu["total_s"])), False


def series(df: pd.DataFrame) -> list[str]:
    rows, _ = _rows(df)
    return [s for s in [*DIRECTIONS.values(), HOST_COPY] if s in set(rows["series"])]


def draw(df: pd.DataFrame, meta: dict) -> plt.Figure:
    ok = df[df["status"] == "ok"].copy()
    ok["cond"] = condition_label(ok, all_conditions(ok, CONDITIONS))
    rows, copies = _rows(ok)
    groups = list(dict.fromkeys(ok["cond"]))
    fig, ax = plt.subplots(figsize=(max(7.0, 0.85 * len(groups) + 2), 3.8))
    if len(rows):
        wide = rows.groupby(["cond", "series"], sort=False)["value"].median().unstack("series")
        wide = wide.reindex(index=groups, columns=series(df))
        zero = wide.map(lambda v: "0" if v == 0 else "")  # no bar for a 0 on a log axis: say it
        common.bars(ax, wide, log=copies, marks=zero)
        ax.tick_params(axis="x", labelsize=7)
        common.legend(ax)
    notes = [not_run_note(df[df["status"] != "ok"], all_conditions(ok, CONDITIONS))]
    if copies:
        ax.set_ylabel("moved in the window, summed over ranks [MB]")
        title = "CUDA memcpy: bytes moved per direction"
    else:
        ax.set_ylabel("aten::copy_ time, summed over ranks [s]")
        title = "Host copies (aten::copy_ time, not bytes)"
        notes.insert(0, f"Bytes per direction: {NOT_MEASURED} (a CPU run makes no CUDA memcpy).")
    text = "\n".join(textwrap.fill(n, 120) for n in notes if n)
    fig.text(0.01, 0.0, text, fontsize=7, color="darkred", va="top")
    fig.suptitle(f"{title}, by template and method\n{common.subtitle(meta)}", fontsize=10)
    fig.tight_layout()
    return fig


if __name__ == "__main__":
    common.main_for(draw, TARGET)
