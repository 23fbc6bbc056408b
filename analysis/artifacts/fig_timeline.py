"""V9 (J Fig.7-8): per rank, when the device was busy over the run, and the pauses between.

Busy intervals are each rank's training and evaluation steps as the host saw them (run/store.py
TIMELINE; on a CPU the stand-in for the GPU's activity, labelled so). Beyond the paper, a profiled
run's kernel records give gpu_busy_pct and the -breakdown CSV (profiles/run_breakdown.py). A pause
is a gap longer than PAUSE_STEPS x the run's median step (and MIN_PAUSE_S), located by the step
after it: "before epoch" (counted from the epoch's start), "before evaluation" or "elsewhere".
Per run: the share of epoch and evaluation starts a pause precedes (mean over ranks) and the
number of pauses. No paper numbers, no self-check.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.lines import Line2D

from analysis import common as c
from analysis import draw
from analysis.driver import Artifact
from analysis.profiles import run_breakdown
from run import store
from run.vision.spec import LOADER_LABELS

KEYS = ["loader", "gpus"]
PAUSE_STEPS = 5.0
MIN_PAUSE_S = 0.2
# extra(): fig-timeline-gaps.csv, -busy.csv, -phases.csv (each epoch's training and evaluation
# span per rank: the figure's epoch and evaluation marks), -breakdown.csv
GAPS, BUSY_TABLE, PHASES, BREAKDOWN = "gaps", "busy", "phases", "breakdown"
BUSY = ("train_step", "eval_step")
SPANS = ("epoch", "eval")  # the timeline's per-epoch lines: training, then evaluation


def read(run: str, scale: str, ranks: int) -> pd.DataFrame:
    rows = []
    for rank in range(ranks):
        for e in store.read_jsonl(store.timeline_file(store.run_dir(scale, run), rank)):
            rows.append({**e, "rank": rank})
    df = pd.DataFrame(rows, columns=["phase", "epoch", "step", "t0", "t1", "rank"])
    if len(df):
        start = df["t0"].min()
        df[["t0", "t1"]] = df[["t0", "t1"]] - start
    return df


def gaps(tl: pd.DataFrame) -> tuple[pd.DataFrame, float]:
    """The pauses of one rank's intervals and the threshold used."""
    busy = tl[tl["phase"].isin(BUSY)].sort_values("t0")
    cols = ["epoch", "where", "start_s", "length_s"]
    if busy.empty:
        return pd.DataFrame(columns=cols), float("nan")
    median = float((busy["t1"] - busy["t0"]).median())
    threshold = max(PAUSE_STEPS * median, MIN_PAUSE_S)
    epoch_start = tl[tl["phase"] == "epoch"].set_index("epoch")["t0"].to_dict()
    out, prev_end, seen = [], None, set()
    for _, b in busy.iterrows():
        key = (b["phase"], b["epoch"])
        first = key not in seen
        seen.add(key)
        if first and b["phase"] == "train_step":
            where, since = "before epoch", epoch_start.get(b["epoch"], prev_end)
        elif first:
            where, since = "before evaluation", prev_end
        else:
            where, since = "elsewhere", prev_end
        if since is not None and b["t0"] - since > threshold:
            out.append({"epoch": b["epoch"], "where": where, "start_s": since,
                        "length_s": b["t0"] - since})  # fmt: skip
        prev_end = b["t1"] if prev_end is None else max(prev_end, b["t1"])
    return pd.DataFrame(out, columns=cols), threshold


def _per_run(runs: pd.DataFrame, scale: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    rows, all_gaps = [], []
    for _, r in runs.iterrows():
        base = {"loader": r["loader"], "gpus": r["gpus"], "status": r["status"], "run": r["run"]}
        if r["status"] != "ok":
            rows.append(base)
            continue
        tl = read(r["run"], scale, int(r["gpus"]))
        shares, counts, thresholds = [], [], []
        for rank, one in tl.groupby("rank"):
            g, th = gaps(one)
            epochs = int(one.loc[one["phase"] == "epoch", "epoch"].nunique())
            starts = g[g["where"] != "elsewhere"]
            shares.append(len(starts.drop_duplicates(["epoch", "where"])) / max(2 * epochs, 1))
            counts.append(len(g))
            thresholds.append(th)
            all_gaps.append(g.assign(run=r["run"], loader=r["loader"], gpus=r["gpus"], rank=rank))
        rows.append({**base, "boundary_pause_share": sum(shares) / max(len(shares), 1),
                     "pauses": sum(counts), "threshold_s": max(thresholds, default=None),
                     "busy_intervals": int(tl["phase"].isin(BUSY).sum())})  # fmt: skip
    gap_cols = ["run", "loader", "gpus", "rank", "epoch", "where", "start_s", "length_s"]
    g = (
        pd.concat(all_gaps, ignore_index=True)[gap_cols]
        if all_gaps
        else pd.DataFrame(columns=gap_cols)
    )
    return pd.DataFrame(rows), g


def table(runs: pd.DataFrame, scale: str) -> pd.DataFrame:
    t, _ = _per_run(runs, scale)
    if not len(t):
        return t
    # beyond the paper: the GPU's own busy share where the run's profile recorded device activity
    split = run_breakdown.table(runs, scale)[["run", "busy_pct"]]
    t = t.merge(split.rename(columns={"busy_pct": "gpu_busy_pct"}), on="run", how="left")
    return t.sort_values(["loader", "gpus"], ascending=[False, True])


def extra(runs: pd.DataFrame, t: pd.DataFrame) -> dict[str, pd.DataFrame]:
    scale = runs.attrs["scale"]
    busy = [
        read(r["run"], scale, int(r["gpus"])).assign(run=r["run"])
        for _, r in runs.iterrows()
        if r["status"] == "ok"
    ]
    cols = ["run", "rank", "phase", "epoch", "t0", "t1"]
    busy_df = pd.concat(busy, ignore_index=True) if busy else pd.DataFrame(columns=cols)
    spans = busy_df[busy_df["phase"].isin(SPANS)][cols] if len(busy_df) else busy_df
    busy_df = busy_df[busy_df["phase"].isin(BUSY)][cols] if len(busy_df) else busy_df
    return {GAPS: _per_run(runs, scale)[1], BUSY_TABLE: busy_df, PHASES: spans,
            BREAKDOWN: run_breakdown.table(runs, scale)}  # fmt: skip


def title(runs: pd.DataFrame, t: pd.DataFrame) -> str:
    where = "GPU ranks" if c.on_gpu(runs) else "CPU ranks, no GPU"
    return f"Training and evaluation steps per rank over time (Scenario B, {where})"


def compact(t: pd.DataFrame) -> pd.DataFrame:
    return c.compact(t, KEYS, ["boundary_pause_share", "pauses", "threshold_s"])


def notes(runs: pd.DataFrame, t: pd.DataFrame) -> list[str]:
    what = (
        "GPU run: the intervals are the host's training and evaluation steps, not yet the GPU's "
        "kernel records."
        if c.on_gpu(runs)
        else "CPU stand-in: the intervals are the gloo ranks' training and evaluation steps on "
        "the CPU, not GPU activity."
    )
    return [what + f" A pause is a gap above {PAUSE_STEPS:g} x the run's median step (at least "
            f"{MIN_PAUSE_S:g} s); the gaps are in the -gaps CSV.",
            run_breakdown.note(run_breakdown.table(runs, runs.attrs.get("scale")),
                               "column gpu_busy_pct, -breakdown CSV")]  # fmt: skip


TARGET = "fig-timeline"
SERIES = {"training step": "tab:green", "evaluation step": "tab:blue",
          "pause (above threshold)": "tab:red"}  # fmt: skip
STEP_SERIES = {"train_step": "training step", "eval_step": "evaluation step"}
# the marks of the -phases table's spans: a line across the rank's row where each began
MARKS = {"epoch": ("epoch start", "-"), "eval": ("evaluation start", "--")}


def _phases(scale: str) -> pd.DataFrame:
    """Each epoch's spans per rank (tables older than it: none)."""
    try:
        return draw.extra_table(TARGET, scale, "phases")
    except FileNotFoundError:
        return pd.DataFrame(columns=["run", "rank", "phase", "epoch", "t0", "t1"])


def figure(df: pd.DataFrame, meta: dict) -> plt.Figure:
    ok = df[df["status"] == "ok"].sort_values(["loader", "gpus"], ascending=[False, True])
    n = max(len(ok), 1)
    fig, axes = plt.subplots(n, 1, figsize=(8, 1.0 + 1.15 * n), squeeze=False, sharex=True)
    gaps = draw.extra_table(TARGET, meta["scale"], "gaps")
    busy_all = draw.extra_table(TARGET, meta["scale"], "busy")
    phases = _phases(meta["scale"])
    pause_label = list(SERIES)[-1]
    for ax, (_, r) in zip(axes[:, 0], ok.iterrows(), strict=False):
        busy = busy_all[busy_all["run"] == r["run"]]
        kind = busy["phase"] if "phase" in busy else pd.Series("train_step", index=busy.index)
        for phase, label in STEP_SERIES.items():  # in the legend's order
            mine = busy[kind == phase]
            for rank, one in mine.groupby("rank"):
                ax.broken_barh(list(zip(one["t0"], one["t1"] - one["t0"], strict=True)),
                               (rank - 0.4, 0.8), color=SERIES[label], label=label)  # fmt: skip
        for _, g in gaps[gaps["run"] == r["run"]].iterrows():
            ax.broken_barh([(g["start_s"], g["length_s"])], (g["rank"] - 0.4, 0.8),
                           color=SERIES[pause_label], label=pause_label)  # fmt: skip
        for _, p in phases[(phases["run"] == r["run"]) & phases["phase"].isin(MARKS)].iterrows():
            _, ls = MARKS[p["phase"]]
            # "_": a mark, not a data series (the figure's legend names it)
            ax.vlines(p["t0"], p["rank"] - 0.5, p["rank"] + 0.5, colors="black", linestyles=ls,
                      lw=1.1, label=f"_{p['phase']}")  # fmt: skip
            if p["rank"] == 0 and p["phase"] == "epoch":
                ax.text(p["t0"], -0.5, f" epoch {int(p['epoch'])}", fontsize=6, va="bottom",
                        ha="left")  # fmt: skip
        if pd.notna(r.get("pauses")) and pd.notna(r.get("threshold_s")):
            ax.set_title(f"{int(r['pauses'])} pause(s) above {r['threshold_s']:.2f} s",
                         fontsize=7, loc="right")  # fmt: skip
        label = LOADER_LABELS[r["loader"]]
        ax.set_ylabel(f"{label}\n{draw.gpus_label(r['gpus'])}", fontsize=8)
        ax.set_yticks(range(int(r["gpus"])))
        ax.set_yticklabels([f"rank {i}" for i in range(int(r["gpus"]))], fontsize=7)
        ax.set_ylim(int(r["gpus"]) - 0.5, -0.5)  # rank 0 on top
    axes[-1, 0].set_xlabel("time since the run's first epoch began [s]")
    # one legend entry per series and mark, drawn or not: a run without pauses shows that it
    # had none
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in SERIES.values()]
    handles += [Line2D([], [], color="black", ls=ls, lw=1.1) for _, ls in MARKS.values()]
    fig.legend(handles, [*SERIES, *(m for m, _ in MARKS.values())], fontsize=8, frameon=False,
               loc="center left", bbox_to_anchor=(1.0, 0.5))  # fmt: skip
    # the host's steps either way; on CPU ranks there is no GPU whose activity they stand for
    where = " (CPU ranks, no GPU)" if (meta.get("gates") or {}).get("gpu") else ""
    fig.suptitle(f"Training and evaluation steps per rank{where}, pauses, epoch and evaluation "
                 f"starts\n{draw.subtitle(meta)}", fontsize=10)  # fmt: skip
    fig.tight_layout()
    return fig


ARTIFACT = Artifact(
    table=table, compact=compact, keys=KEYS, notes=notes, extra=extra, title=title, figure=figure
)
