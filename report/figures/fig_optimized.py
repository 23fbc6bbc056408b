"""O1-O4 (beyond the paper): one waterfall per ladder, the throughput of each step with its
speed-up over the step before, and accuracy, loss or the optimizer's state as a second series."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from report.figures import common

TARGET = "fig-optimized"
# the second series of each experiment: the column and its axis label
SECOND = {"vision": ("accuracy_pct", "test accuracy [%]"), "llm": ("loss", "loss after N steps")}


def _second(g: pd.DataFrame, exp: str) -> tuple[str, str]:
    if exp == "O4":  # the memory variant: what it changes is the optimizer's state (O4a); the
        # peak would flatter the paged run, whose managed memory torch's peak does not see
        return "optimizer_state_mib", "optimizer state [MiB]"
    return SECOND[g["workload"].iloc[0]]


def ladder(ax: plt.Axes, g: pd.DataFrame, exp: str) -> None:
    """Bars: median throughput per step and GPU count, min-max whiskers, x speed-up over the
    step before on top; a step that did not run is named with its status."""
    steps = g.drop_duplicates("step").sort_values("step")
    labels, xs = steps["step_label"].tolist(), steps["step"].tolist()
    gpus = sorted(g["gpus"].unique())
    width = 0.8 / len(gpus)
    ok = g[g["status"] == "ok"]
    thr = ok.groupby(["gpus", "step"])["throughput"].agg(["median", "min", "max"])
    col, name = _second(g, exp)
    twin = ax.twinx()
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
            ax.bar(s + off, m, width=width, color=f"C{j}", **spread,
                   label=f"{n} GPU{'s' if n > 1 else ''}" if s == xs[0] else None)  # fmt: skip
            if (n, s - 1) in thr.index:
                ax.text(s + off, hi, f"x{m / thr.loc[(n, s - 1), 'median']:.2f}", ha="center",
                        va="bottom", fontsize=7)  # fmt: skip
        second = ok[ok["gpus"] == n].groupby("step")[col].median().dropna()
        twin.plot(second.index + off, second.to_numpy(), "k" + "os^dv"[j % 5] + ":",
                  markersize=4, label=f"{name}, {n} GPU{'s' if n > 1 else ''}")  # fmt: skip
    lo, hi = twin.get_ylim()
    mid, half = (lo + hi) / 2, max(hi - lo, 0.1 * abs((lo + hi) / 2)) / 2
    twin.set_ylim(mid - half, mid + half)  # a 1-point wobble must not fill the panel's height
    ax.set_xticks(xs, labels, rotation=30, ha="right", fontsize=8)
    ax.set_xlim(min(xs) - 0.5, max(xs) + 0.5)  # a step with no bar keeps its slot
    ax.set_ylabel(g["unit"].dropna().iloc[0] if g["unit"].notna().any() else "throughput")
    ax.set_title(exp, fontsize=9, loc="left")
    twin.set_ylabel(name, fontsize=8)
    ax.legend(fontsize=7, loc="upper left")


def draw(df: pd.DataFrame, meta: dict) -> plt.Figure:
    exps = list(dict.fromkeys(df["experiment"]))
    cols = 2 if len(exps) > 1 else 1
    rows = (len(exps) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(5.5 * cols, 3.6 * rows), squeeze=False)
    for ax, exp in zip(axes.flat, exps, strict=False):
        ladder(ax, df[df["experiment"] == exp], exp)
    for ax in list(axes.flat)[len(exps) :]:
        ax.set_axis_off()
    fig.suptitle(
        "Beyond the paper: the optimisations applied one at a time (bars: median, whiskers: "
        f"min-max over repeats; x = speed-up over the step before; dotted: second axis)\n"
        f"{common.subtitle(meta)}",
        fontsize=9,
    )
    fig.tight_layout()
    return fig


if __name__ == "__main__":
    common.main_for(draw, TARGET)
