"""Shared by the profile artifacts (V5, V6, L3, L4, L7, L9): their Artifact, and their figures'
grouped bars per metric.

A figure shows the paper's metrics when the profile measured them (a measured 0: a run that did
not call it), else says so and shows the CPU stand-ins, titled as what was recorded, never as
zeros of the paper's metrics or as "CUDA API calls"; metrics the profiler could not record are
named under it. Every group shows the same series in the same place. A CPU stand-in absent from
a run was not called (its slot stays empty); a "top CPU op" is only a run's top three, so one is
drawn only when every group has it. CPU-op times are inclusive (an op's time holds its callees):
side by side, never stacked nor summed into "other".
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable

import matplotlib.pyplot as plt
import pandas as pd

from analysis import draw as common
from analysis.driver import Artifact
from analysis.profiles import artifact as pa
from analysis.profiles.artifact import CPU, CPU_PROXIES, EXTRA, PAPER
from analysis.profiles.coverage import NOT_MEASURED, PROFILER_NAMES
from analysis.profiles.metrics import CPU_PREFIX, MEMCPY_METRICS, NCCL_METRICS
from run.llm.catalog import TEMPLATE_LABELS
from run.llm.spec import METHOD_LABELS

LEGEND_WIDTH = 42  # characters per legend line: the all-API launch label is long
TOP = "top CPU op: "  # the analysis's label prefix of a run's top CPU ops
# the autograd engine's call of a backward node: its time holds the node's (MmBackward0, the
# gradient of a matrix product) and a little bookkeeping, so the two are one series, not two
WRAPPER = "autograd::engine::evaluate_function: "
WRAPPED = " (backward node, with its autograd-engine call)"
# a condition's value in a group's label (method and dataset as the papers name them)
LABEL = {
    "pin_memory": lambda v: "pin" if str(v) == "True" else "nopin",
    "gpus": common.gpus_label,
    "image_size": lambda v: f"{v} px",
    "method": lambda v: METHOD_LABELS.get(v, str(v)),
    "dataset": lambda v: TEMPLATE_LABELS.get(v, str(v)),
}
# columns that tell runs apart besides the figure's own conditions (shown when they vary, so
# that two runs never share a group)
OTHER_CONDITIONS = ["gpus", "pin_memory", "image_size", "precision", "method", "dataset"]


def condition_label(df: pd.DataFrame, conditions: list[str]) -> pd.Series:
    def one(r: pd.Series) -> str:
        parts = [LABEL.get(k, str)(r[k]) for k in conditions]
        # a long name ("Error Correction") on two lines: the groups' labels must not run together
        return "\n".join(textwrap.fill(p, 11) for p in parts)

    return df.apply(one, axis=1)


def metrics(conditions: list[str], title: str) -> Callable[[pd.DataFrame, dict], plt.Figure]:
    """The figure of a profile artifact (V5, L3, L4, L7): metrics_figure by `conditions`."""

    def figure(df: pd.DataFrame, meta: dict) -> plt.Figure:
        return metrics_figure(df, meta, conditions, title, common.subtitle(meta))

    return figure


def grouped_bars(
    ax: plt.Axes,
    df: pd.DataFrame,
    col: str,
    ylabel: str,
    log: bool = False,
    groups: list[str] | None = None,
) -> None:
    """A group per condition (`groups`, else table order), a bar per label: medians over runs."""
    conds = groups or list(dict.fromkeys(df["cond"]))
    labels = list(dict.fromkeys(df["label"]))
    vals = pd.to_numeric(df[col], errors="coerce")
    wide = vals.groupby([df["cond"], df["label"]], sort=False).median().unstack("label")
    wide = wide.reindex(index=conds, columns=labels)
    # a measured 0 (a GPU run that did not call it) is said, not left as an empty slot
    common.bars(ax, wide, log=log, marks=wide.map(lambda v: "0" if v == 0 else ""))
    ax.tick_params(axis="x", labelsize=7)
    ax.set_ylabel(ylabel)


def all_conditions(df: pd.DataFrame, conditions: list[str]) -> list[str]:
    """`conditions` and any other condition column that varies in `df`."""
    extra = [c for c in OTHER_CONDITIONS if c in df and c not in conditions and df[c].nunique() > 1]
    return [*conditions, *extra]


def _shown(df: pd.DataFrame) -> tuple[pd.DataFrame, bool, dict[str, list[str]]]:
    """(rows drawn, whether they are the paper's metrics, labels left out by why)."""
    measured = df["measured"].astype(str) == "True"
    ours = df["kind"].isin([PAPER, EXTRA])
    paper = df[ours & measured]
    if (paper["kind"] == PAPER).any():
        # additive (no metric nests in another but the all-API launches, which stay in the kept
        # head): past MAX_SERIES the tail is summed into "other"
        have = set(paper["label"])
        kept, folded = common.fold([x for x in dict.fromkeys(df.loc[ours, "label"]) if x in have])
        rows = paper.assign(label=paper["label"].where(~paper["label"].isin(folded), common.OTHER))
        rows = rows.groupby(["cond", "run", "label"], sort=False, as_index=False).agg(
            {"share_pct": "sum", "total_s": "sum", "metric": "first"}
        )
        return _in_order(rows, kept), True, {}
    cpu = df[df["kind"] == CPU].copy()
    top = cpu["label"].astype(str).str.startswith(TOP)
    # the analysis truncates a top op's label; its metric holds the whole name
    cpu.loc[top, "label"] = TOP + cpu.loc[top, "metric"].astype(str).str.removeprefix(CPU_PREFIX)
    groups = cpu["cond"].nunique()
    everywhere = cpu[top].groupby("label")["cond"].nunique() == groups
    # the stand-ins in the analysis's order, whichever run has which
    known = [f"{label} ({what})" for label, what, _ in CPU_PROXIES]
    have = set(cpu.loc[~top, "label"])
    proxies = [x for x in known if x in have] + sorted(have - set(known))
    by_time = cpu[top].groupby("label")["total_s"].sum().sort_values(ascending=False).index
    tops = [x for x in by_time if everywhere.get(x, False)]
    # the engine's call of a backward node is named as the node; where it is drawn, the node
    # itself (inside it, nearly the same time) is not a second series
    rename = {x: TOP + x.removeprefix(TOP + WRAPPER) + WRAPPED
              for x in by_time if x.startswith(TOP + WRAPPER)}  # fmt: skip
    inner = [x for x in by_time if TOP + WRAPPER + x.removeprefix(TOP) in tops]
    tops = [rename.get(x, x) for x in tops if x not in inner]
    by_time = [rename.get(x, x) for x in by_time]
    cpu["label"] = cpu["label"].replace(rename)
    candidates = [*proxies, *tops]
    kept = candidates[: common.MAX_SERIES]
    left_out = {
        f"past {common.MAX_SERIES} series": candidates[common.MAX_SERIES :],
        "among some runs' top three CPU ops only": [
            x for x in by_time if x not in tops and x not in inner
        ],
        "inside the autograd-engine call drawn for it (which includes it)": inner,
    }
    return _in_order(cpu[cpu["label"].isin(kept)], kept), False, left_out


def _in_order(rows: pd.DataFrame, order: list[str]) -> pd.DataFrame:
    return rows.iloc[rows["label"].map(order.index).to_numpy().argsort(kind="stable")]


def recorded(df: pd.DataFrame) -> str:
    """What the drawn rows are, in words ("CUDA API calls", "... and copies", "CPU ops") and
    which profiler recorded them."""
    ok = df[(df["status"] == "ok") & (df["measured"].astype(str) == "True")]
    sources = sorted(set(",".join(ok["source"].dropna().astype(str)).split(",")) - {""})
    by = " and ".join(PROFILER_NAMES.get(s, s) for s in sources) or "the profiler"
    metrics = set(ok.loc[ok["kind"].isin([PAPER, EXTRA]), "metric"])
    if not (ok["kind"] == PAPER).any():
        return f"CPU ops ({by}; no CUDA on this machine)"
    parts = [
        what
        for what, have in (
            ("CUDA API calls", metrics - set(MEMCPY_METRICS) - set(NCCL_METRICS)),
            ("CUDA copies", metrics & set(MEMCPY_METRICS)),
            ("NCCL kernels", metrics & set(NCCL_METRICS)),
        )
        if have
    ]
    parts = [parts[0], *(p.removeprefix("CUDA ") for p in parts[1:])]  # "CUDA" once
    return (", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else parts[0]) + (
        f" ({by})"
    )


def metrics_figure(
    df: pd.DataFrame, meta: dict, conditions: list[str], title: str, subtitle: str
) -> plt.Figure:
    """Share (%) and seconds per metric, one panel above the other; `title` may hold "{what}"
    (`recorded`)."""
    not_run = df[df["status"] != "ok"]
    df = df[df["status"] == "ok"].copy()
    df["cond"] = condition_label(df, all_conditions(df, conditions))
    shown, is_paper, left_out = _shown(df) if len(df) else (df, False, {})
    shown = shown.assign(label=shown["label"].astype(str).map(_wrap))
    n_conds, n_series = max(df["cond"].nunique(), 1), max(shown["label"].nunique(), 1)
    width = max(7.5, n_conds * max(0.13 * n_series + 0.35, 0.8))  # a group's bars, its label
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(width, 6.4), sharex=True)
    notes = []
    if shown.empty:
        for ax in (ax1, ax2):
            ax.text(0.5, 0.5, "no profiled run", ha="center", va="center", transform=ax.transAxes)
    else:
        conds = list(dict.fromkeys(df["cond"]))  # a group with no bar keeps its place
        grouped_bars(ax1, shown, "share_pct", "share of profiled time [%]", groups=conds)
        grouped_bars(ax2, shown, "total_s", "time, summed over ranks [s]", True, conds)
        ax2.legend(fontsize=7, frameon=False, loc="center left", bbox_to_anchor=(1.01, 1.1))
    if is_paper:
        # a GPU profile may still lack a metric its profiler cannot record (cudaEventDestroy
        # under torch.profiler): name it and why, rather than leave a silent gap
        measured = df["measured"].astype(str) == "True"
        paper_metrics = set(df.loc[(df["kind"] == PAPER) & measured, "metric"])
        gaps = df[(df["kind"] == PAPER) & ~measured & ~df["metric"].isin(paper_metrics)]
        by_note = gaps.groupby("note", sort=True)["label"].unique()
        notes += [f"{', '.join(sorted(ls))}: {note}" for note, ls in by_note.items()]
    elif len(df):
        missing = sorted(set(df.loc[df["kind"] == PAPER, "label"]))
        notes.append(f"Paper's metrics {NOT_MEASURED}: " + ", ".join(missing))
        ax1.set_title("inclusive CPU-op times: nested ops overlap, the bars do not add up",
                      fontsize=8)  # fmt: skip
    for why, names in (left_out or {}).items():
        if names:
            notes.append(f"Not drawn, {why}: " + ", ".join(x.removeprefix(TOP) for x in names))
    notes.append(not_run_note(not_run, all_conditions(df, conditions)))
    if "pin_memory" in all_conditions(df, conditions) and (meta.get("gates") or {}).get("gpu"):
        # pinned host memory speeds copies to a GPU; on CPU ranks there is no such copy
        notes.append("pin_memory is a no-op without a GPU: pin and nopin groups did the same work, "
                     "and differ only by run-to-run noise.")  # fmt: skip
    if any(notes):
        text = "\n".join(
            textwrap.fill(n, int(width * 14), break_on_hyphens=False) for n in notes if n
        )
        fig.text(0.01, 0.0, text, fontsize=7, color="darkred", va="top")
    what = recorded(df) if len(df) else "profiler metrics"
    # within the figure's width, broken between phrases only
    title = common.wrap_phrases(title.format(what=what), int(width * 11))
    fig.suptitle(f"{title}\n{subtitle}", fontsize=10)
    fig.tight_layout()
    return fig


def not_run_note(not_run: pd.DataFrame, conditions: list[str]) -> str:
    """A line naming the cells that did not finish (no group shows them), with their status."""
    if not_run.empty:
        return ""
    cells = condition_label(not_run, [c for c in conditions if c in not_run])
    why = sorted(set(zip(cells.str.replace("\n", " "), not_run["status"], strict=True)))
    return "Not run: " + ", ".join(f"{c} ({st})" for c, st in why)


def _wrap(label: str) -> str:
    return textwrap.fill(label, LEGEND_WIDTH)


def gates(runs: pd.DataFrame, t: pd.DataFrame) -> dict[str, str]:
    return {"gpu": pa.gpu_gate(runs)}


def artifact(
    build_table: Callable[[pd.DataFrame, pd.DataFrame], pd.DataFrame],
    figure_title: str | None = None,
    conditions: list[str] | None = None,
    **fields,
) -> Artifact:
    """A profile artifact: its table is build_table(runs, the runs' tidy metrics); notes and gates
    default to profiles/artifact.py's and the `gpu` gate; with `figure_title`, its figure is
    `metrics` by `conditions` (default: its keys)."""
    fields = {"notes": pa.notes, "gates": gates, **fields}
    if figure_title is not None:
        fields["figure"] = metrics(list(conditions or fields["keys"]), figure_title)
    return Artifact(
        table=lambda runs, scale: build_table(runs, pa.run_metrics(runs, scale)), **fields
    )
