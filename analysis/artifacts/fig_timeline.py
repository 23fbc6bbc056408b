"""V9 (J Fig.7-8): per rank, when the device was busy over the run, and the pauses between.

Busy intervals come from each rank's timeline file (run/store.py TIMELINE): the training and
evaluation steps as the host saw them (from the batch in hand to the optimiser step done). On a
CPU that is the stand-in for the GPU's activity and is labelled so. On a GPU the intervals drawn
are the same host steps; the GPU's own kernel records (nsys, torch.profiler) enter, beyond the
paper, as each profiled run's time breakdown by interval union (analysis/profiles/run_breakdown.py):
the column gpu_busy_pct (the union of kernels, copies and memsets over the rank's window) and the
-breakdown CSV.

A pause is a gap between busy intervals longer than PAUSE_STEPS x the run's median step (and at
least MIN_PAUSE_S). It is located by what follows it: the first step of an epoch ("before epoch",
the gap counted from the epoch's start), the first evaluation step of an epoch ("before
evaluation"), or any other step ("elsewhere"). Per run: the share of epoch and evaluation starts
that a pause precedes (mean over ranks) and the number of pauses. The paper printed no numbers:
no paper() table and no self-check.
"""

from __future__ import annotations

import pandas as pd

from analysis import common as c
from analysis.profiles import run_breakdown
from run import store

FIGURE = True
KEYS = ["loader", "gpus"]
PAUSE_STEPS = 5.0
MIN_PAUSE_S = 0.2
# extra(): fig-timeline-gaps.csv, -busy.csv, -phases.csv (each epoch's training and evaluation
# span per rank: the figure's epoch and evaluation marks), -breakdown.csv
GAPS, BUSY_TABLE, PHASES, BREAKDOWN = "gaps", "busy", "phases", "breakdown"
BUSY = ("train_step", "eval_step")
SPANS = ("epoch", "eval")  # the timeline's per-epoch lines: training, then evaluation


def read(run: str, profile: str, ranks: int) -> pd.DataFrame:
    """Every rank's intervals of a run, times relative to the run's first start."""
    rows = []
    for rank in range(ranks):
        for e in store.read_jsonl(store.timeline_file(store.run_dir(profile, run), rank)):
            rows.append({**e, "rank": rank})
    df = pd.DataFrame(rows, columns=["phase", "epoch", "step", "t0", "t1", "rank"])
    if len(df):
        start = df["t0"].min()
        df[["t0", "t1"]] = df[["t0", "t1"]] - start
    return df


def gaps(tl: pd.DataFrame) -> tuple[pd.DataFrame, float]:
    """The pauses of one rank's intervals and the threshold used (see the module docstring)."""
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


def _per_run(runs: pd.DataFrame, profile: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    rows, all_gaps = [], []
    for _, r in runs.iterrows():
        base = {"loader": r["loader"], "gpus": r["gpus"], "status": r["status"], "run": r["run"]}
        if r["status"] != "ok":
            rows.append(base)
            continue
        tl = read(r["run"], profile, int(r["gpus"]))
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


def table(runs: pd.DataFrame, profile: str) -> pd.DataFrame:
    t, _ = _per_run(runs, profile)
    if not len(t):
        return t
    # beyond the paper: the GPU's own busy share where the run's profile recorded device activity
    split = run_breakdown.table(runs, profile)[["run", "busy_pct"]]
    t = t.merge(split.rename(columns={"busy_pct": "gpu_busy_pct"}), on="run", how="left")
    return t.sort_values(["loader", "gpus"], ascending=[False, True])


def extra(runs: pd.DataFrame, t: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The pauses, and every busy interval (what the figure draws), one row per interval."""
    profile = runs.attrs["profile"]
    busy = [
        read(r["run"], profile, int(r["gpus"])).assign(run=r["run"])
        for _, r in runs.iterrows()
        if r["status"] == "ok"
    ]
    cols = ["run", "rank", "phase", "epoch", "t0", "t1"]
    busy_df = pd.concat(busy, ignore_index=True) if busy else pd.DataFrame(columns=cols)
    spans = busy_df[busy_df["phase"].isin(SPANS)][cols] if len(busy_df) else busy_df
    busy_df = busy_df[busy_df["phase"].isin(BUSY)][cols] if len(busy_df) else busy_df
    return {GAPS: _per_run(runs, profile)[1], BUSY_TABLE: busy_df, PHASES: spans,
            BREAKDOWN: run_breakdown.table(runs, profile)}  # fmt: skip


def title(runs: pd.DataFrame, t: pd.DataFrame) -> str:
    """What the intervals are: the host's steps on either machine (not the GPU's kernels)."""
    where = "GPU ranks" if c.on_gpu(runs) else "CPU ranks, no GPU"
    return f"Training and evaluation steps per rank over time (Scenario B, {where})"


def compact(t: pd.DataFrame) -> pd.DataFrame:
    """Loader and GPUs as rows: pauses and the share of epoch/evaluation starts they precede."""
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
            run_breakdown.note(run_breakdown.table(runs, runs.attrs.get("profile")),
                               "column gpu_busy_pct, -breakdown CSV")]  # fmt: skip
