"""fig-optimized's figure (O1-O4), beside analysis/artifacts/fig_optimized.py for its size.

Per ladder the throughput of each step with its speed-up over the step before and, in a strip of
its own on a zero-based axis, the step's accuracy, loss or optimizer state (a twin axis cut to the
data's range made one or two test images look like a trend). Per profiled faithful/last pair, a
panel of the profile diff's seconds, before and after."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from analysis import draw

TARGET = "fig-optimized"
MARKERS = "os^dv"  # the second measure's line per GPU count
PROFILE_DIFF = "profile-diff"  # analysis/artifacts/fig_optimized.py's extra table
PAIRS = "\nlast panels: the profiles of a ladder's faithful and last steps, both profiled"
DIFF_SIDES = {"a": "faithful profile", "b": "optimised profile"}  # the diff panels' two bars
# the second series of each experiment: the column and its axis label
SECOND = {"vision": ("accuracy_pct", "test accuracy [%]"), "llm": ("loss", "loss after N steps")}
STRIP = 1.1  # the second measure's strip, in heights of the bars' 3


def _second(g: pd.DataFrame, exp: str) -> tuple[str, str]:
    if exp == "O4":  # the memory variant: what it changes is the optimizer's state (O4a); the
        # peak would flatter the paged run, whose managed memory torch's peak does not see
        return "optimizer_state_mib", "optimizer state [MiB]"
    return SECOND[g["workload"].iloc[0]]


def ladder(
    ax: plt.Axes, strip: plt.Axes, g: pd.DataFrame, exp: str, palette: dict[str, str]
) -> None:
    """Bars: median throughput per step and GPU count, whiskers, x speed-up on top, a status
    where a step did not run; `strip` (under `ax`): the second measure's median, from zero."""
    steps = g.drop_duplicates("step").sort_values("step")
    labels, xs = steps["step_label"].tolist(), steps["step"].tolist()
    gpus = sorted(g["gpus"].unique())
    width = 0.8 / len(gpus)
    ok = g[g["status"] == "ok"]
    thr = ok.groupby(["gpus", "step"])["throughput"].agg(["median", "min", "max"])
    col, name = _second(g, exp)
    for j, n in enumerate(gpus):
        off = (j - (len(gpus) - 1) / 2) * width
        for s in xs:
            if (n, s) not in thr.index:
                status = "/".join(sorted(set(g[(g["gpus"] == n) & (g["step"] == s)]["status"])))
                ax.text(s + off, 0, status or "-", rotation=90, ha="center", va="bottom",
                        fontsize=7, color="firebrick")  # fmt: skip
                continue
            m, lo, hi = thr.loc[(n, s)]
            spread = {"yerr": [[m - lo], [hi - m]], "capsize": 2} if hi > lo else {}
            ax.bar(s + off, m, width=width, color=palette[draw.gpus_label(n)], **spread,
                   label=draw.gpus_label(n) if s == xs[0] else None)  # fmt: skip
            if (n, s - 1) in thr.index:
                ax.text(s + off, hi, f"x{m / thr.loc[(n, s - 1), 'median']:.2f}", ha="center",
                        va="bottom", fontsize=7)  # fmt: skip
        second = ok[ok["gpus"] == n].groupby("step")[col].median().dropna()
        strip.plot(second.index + off, second.to_numpy(), ":", color=palette[draw.gpus_label(n)],
                   marker=MARKERS[j % 5], markersize=4, label=draw.gpus_label(n))  # fmt: skip
    top = ok[col].max() if ok[col].notna().any() else 1.0
    # from zero: a 1-point wobble in accuracy stays a 1-point wobble; 100 % is the ceiling
    strip.set_ylim(0, 105 if col == "accuracy_pct" else top * 1.25)
    if len(gpus) <= 2:  # the values, which a zero-based strip shows flat (more would collide)
        for line in strip.get_lines():
            for x, v in zip(*line.get_data(), strict=True):
                low = v < strip.get_ylim()[1] / 2  # above a low point, below a high one
                strip.annotate(f"{v:.3g}", (x, v), xytext=(0, 3 if low else -3), fontsize=6,
                               textcoords="offset points", ha="center",
                               va="bottom" if low else "top")  # fmt: skip
    strip.set_xticks(xs, labels, rotation=30, ha="right", fontsize=8)
    strip.set_xlim(min(xs) - 0.5, max(xs) + 0.5)  # a step with no bar keeps its slot
    strip.set_ylabel(name, fontsize=7)
    strip.tick_params(axis="y", labelsize=7)
    strip.grid(axis="y", alpha=0.3)
    ax.tick_params(axis="x", labelbottom=False)
    ax.set_ylim(0, ax.get_ylim()[1] * 1.12)  # room for the speed-ups over the tallest bar
    ax.set_ylabel(g["unit"].dropna().iloc[0] if g["unit"].notna().any() else "throughput")
    ax.set_title(f"{exp}: throughput (bars), {name} (strip below)", fontsize=9, loc="left")


def profile_diff(scale: str) -> pd.DataFrame:
    """The seconds rows of the profile diff (empty where none, or where the tables predate it)."""
    try:
        d = draw.extra_table(TARGET, scale, PROFILE_DIFF)
    except FileNotFoundError:
        return pd.DataFrame(columns=["experiment", "gpus", "optimised_step", "metric", "a", "b"])
    return d[d["field"] == "total_s"]


def diff_panel(ax: plt.Axes, d: pd.DataFrame, palette: dict[str, str]) -> None:
    """Each kept metric's seconds in both profiles, the change in percent after the pair."""
    metrics = list(dict.fromkeys(d["metric"]))[::-1]  # the diff's order, top to bottom
    rows = d.set_index("metric")
    h = 0.38
    for i, m in enumerate(metrics):
        for k, (col, label) in enumerate(DIFF_SIDES.items()):
            v = rows.loc[m, col]
            ax.barh(i + (0.5 - k) * h, 0 if pd.isna(v) else v, height=h, color=palette[label],
                    label=label if i == 0 else None)  # fmt: skip
        pct, present = rows.loc[m, "change_pct"], rows.loc[m, "present"]
        text = f"{pct:+.0f}%" if pd.notna(pct) and present == "both" else str(present)
        end = max(x for x in (rows.loc[m, "a"], rows.loc[m, "b"], 0) if pd.notna(x))
        ax.text(end, i, f" {text}", va="center", fontsize=7)
    ax.set_yticks(range(len(metrics)), metrics, fontsize=7)
    ax.set_xlabel("seconds in the profile (summed over ranks)", fontsize=8)
    ax.set_xlim(0, ax.get_xlim()[1] * 1.2)  # room for the change labels
    ax.legend(fontsize=7, frameon=False, loc="lower right")
    r = d.iloc[0]
    ax.set_title(f"{r['experiment']}, {draw.gpus_label(r['gpus'])}: profile, faithful -> "
                 f"{r['optimised_step']}", fontsize=9, loc="left")  # fmt: skip


def figure(df: pd.DataFrame, meta: dict) -> plt.Figure:
    exps = list(dict.fromkeys(df["experiment"]))
    diffs = [g for _, g in profile_diff(meta["scale"]).groupby(["experiment", "gpus"], sort=True)]
    panels = len(exps) + len(diffs)
    cols = 2 if panels > 1 else 1
    rows = (panels + cols - 1) // cols
    # constrained: the suptitle, the panels' titles and the strips' labels never overlap
    fig = plt.figure(figsize=(5.5 * cols, 1.0 + 4.2 * rows), layout="constrained")
    grid = fig.add_gridspec(rows, cols)
    gpus = [draw.gpus_label(g) for g in sorted(df["gpus"].dropna().unique())]
    palette = draw.colours([*gpus, *DIFF_SIDES.values()])
    first = None
    for cell, exp in zip(grid, exps, strict=False):
        sub = cell.subgridspec(2, 1, height_ratios=[3, STRIP])
        ax = fig.add_subplot(sub[0])
        ladder(ax, fig.add_subplot(sub[1], sharex=ax), df[df["experiment"] == exp], exp, palette)
        first = first or ax
    for cell, d in zip(list(grid)[len(exps) :], diffs, strict=False):
        diff_panel(fig.add_subplot(cell), d, palette)
    handles, labels = first.get_legend_handles_labels() if first else ([], [])
    fig.legend(handles, labels, title="GPUs (ranks)", fontsize=8, title_fontsize=8,
               frameon=False, loc="outside right center")  # fmt: skip
    # whiskers are promised only where some step has repeats that differ
    ok = df[df["status"] == "ok"]
    ends = ok.groupby(["experiment", "gpus", "step"])["throughput"].agg(["min", "max"])
    repeats = (ends["max"] > ends["min"]).any()
    spread = "median, whiskers: min-max over repeats" if repeats else "one run each"
    fig.suptitle(
        "Beyond the paper: the optimisations applied one at a time\n"
        f"bars: throughput, {spread}; x = speed-up over the step before\n"
        f"strip below: the step's accuracy, loss or optimizer state, from zero, same colours"
        f"{PAIRS if diffs else ''}"
        f"\n{draw.subtitle(meta)}",
        fontsize=9,
    )
    return fig
