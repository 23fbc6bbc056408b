"""Shared by the artifacts' figures: their series drawn one way everywhere (at most MAX_SERIES,
colours from one palette, grey kept for "other", grouped bars where the x axis has few values)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from analysis.common import gpus_label  # noqa: E402, F401 (the figures read it here)
from run import store  # noqa: E402

# tab10 without its grey: nine colours a reader tells apart, grey left for OTHER
PALETTE = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown",
           "tab:pink", "tab:olive", "tab:cyan"]  # fmt: skip
OTHER, OTHER_COLOUR = "other", "tab:gray"
MAX_SERIES = 8  # per panel: more bars per group than this cannot be read
FEW_POINTS = 2  # an x axis with this few values is drawn as grouped bars, not lines
CPU_DALI = "\nno GPU: DALI decodes on the CPU"


def load(target: str, scale: str) -> tuple[pd.DataFrame, dict]:
    csv = store.tables_dir(scale) / f"{target}.csv"
    if not csv.is_file():
        raise FileNotFoundError(f"{csv} missing: run `make {target} PROFILE={scale}` first")
    return pd.read_csv(csv), json.loads(csv.with_suffix(".json").read_text())


def save(fig: plt.Figure, target: str, scale: str) -> Path:
    store.figures_dir(scale).mkdir(parents=True, exist_ok=True)
    png = store.figures_dir(scale) / f"{target}.png"
    fig.savefig(png, dpi=130, bbox_inches="tight")
    fig.savefig(png.with_suffix(".pdf"), bbox_inches="tight")
    plt.close(fig)
    return png


def extra_table(target: str, scale: str, name: str) -> pd.DataFrame:
    return pd.read_csv(store.tables_dir(scale) / f"{target}-{name}.csv")


def colours(series: Sequence[str]) -> dict[str, str]:
    """One colour per series, OTHER grey; raises past the palette (a repeated colour would make
    two series one)."""
    named = [x for x in series if x != OTHER]
    if len(named) > len(PALETTE):
        raise ValueError(f"{len(named)} series, the palette has {len(PALETTE)} colours")
    out = dict(zip(named, PALETTE, strict=False))
    return out | ({OTHER: OTHER_COLOUR} if OTHER in series else {})


def fold(series: Sequence[str], limit: int = MAX_SERIES) -> tuple[list[str], list[str]]:
    """(series kept, series folded): beyond `limit`, the first limit-1 and OTHER for the rest."""
    series = list(series)
    if len(series) <= limit:
        return series, []
    return [*series[: limit - 1], OTHER], series[limit - 1 :]


def bars(
    ax: plt.Axes,
    wide: pd.DataFrame,
    log: bool = False,
    palette: dict[str, str] | None = None,
    hatched: Sequence[str] = (),
    marks: pd.DataFrame | None = None,
) -> dict[str, str]:
    """Grouped bars: a group per row of `wide`, a bar per column, a slot kept for a NaN so that a
    series sits in the same place in every group; `hatched` series hatched, `marks` (same shape)
    text written in a slot (why it has no bar). Returns series -> colour."""
    cols = palette or colours([str(c) for c in wide.columns])
    values = wide.to_numpy(dtype=float)
    positive = values[np.isfinite(values) & (values > 0)]
    # a log axis only where the values span more than two decades; within less it shows little
    # but hides every 0
    log = log and len(positive) > 0 and positive.max() > 100 * positive.min()
    width = 0.8 / max(len(wide.columns), 1)
    x = np.arange(len(wide.index))
    for i, col in enumerate(wide.columns):
        y = wide[col].astype(float).to_numpy()
        if log:  # a 0 has no place on a log axis: no bar
            y = np.where(y > 0, y, np.nan)
        ax.bar(x + (i - (len(wide.columns) - 1) / 2) * width, y, width, label=str(col),
               color=cols[str(col)], hatch="//" if col in hatched else None,
               edgecolor="white")  # fmt: skip
        for xi, text in zip(x, marks[col] if marks is not None else [], strict=False):
            if isinstance(text, str) and text:
                ax.text(xi + (i - (len(wide.columns) - 1) / 2) * width, 0.02, text, rotation=90,
                        ha="center", va="bottom", fontsize=7, color="dimgrey",
                        transform=ax.get_xaxis_transform())  # fmt: skip
    ax.set_xticks(x, [str(v) for v in wide.index])
    if log:
        ax.set_yscale("log")
    ax.grid(axis="y", alpha=0.3)
    return cols


def lines_or_bars(
    ax: plt.Axes,
    wide: pd.DataFrame,
    xlabel: str,
    palette: dict[str, str] | None = None,
    dashed: Sequence[str] = (),
) -> dict[str, str]:
    """`wide` (index: a numeric x) as lines, or as grouped bars with FEW_POINTS x values or fewer
    (a line through two points suggests a trend); `dashed` series dashed with open markers
    (hatched as bars), so that one equal to another still shows."""
    if len(wide.index) <= FEW_POINTS:
        out = bars(ax, wide, palette=palette, hatched=dashed)
    else:
        out = palette or colours([str(c) for c in wide.columns])
        for col in wide.columns:
            d = wide[col].dropna()
            style = {"ls": "--", "mfc": "none"} if col in dashed else {}
            ax.plot(d.index, d.to_numpy(), marker="o", label=str(col), color=out[str(col)],
                    **style)  # fmt: skip
        ax.set_xticks(list(wide.index))
        ax.grid(alpha=0.3)
    ax.set_xlabel(xlabel)
    return out


def status(s: pd.Series) -> str:
    """A cell's status: "ok" where some run finished, else its runs' statuses."""
    return "ok" if (s == "ok").any() else "/".join(sorted(set(s.astype(str))))


def legend(ax: plt.Axes, title: str | None = None, fig: plt.Figure | None = None) -> None:
    """`ax`'s legend right of the axes, where it hides no bar; with `fig`, one for the figure."""
    handles, labels = ax.get_legend_handles_labels()
    if fig is not None:
        fig.legend(handles, labels, title=title, fontsize=8, title_fontsize=8, frameon=False,
                   loc="center left", bbox_to_anchor=(1.0, 0.5))  # fmt: skip
    else:
        ax.legend(handles, labels, title=title, fontsize=8, title_fontsize=8, frameon=False,
                  loc="upper left", bbox_to_anchor=(1.01, 1.0))  # fmt: skip


def panel_bars(
    df: pd.DataFrame,
    panel: str,
    panels: Sequence,
    index: str,
    rows: Sequence,
    columns: str,
    series: Sequence[str],
    value: str,
    agg: str = "median",
    label: Callable[[object], str] | None = None,
    figsize: tuple[float, float] = (12, 3.8),
    sharey: bool = True,
) -> tuple[plt.Figure, list[plt.Axes]]:
    """A panel per value of `panel` of grouped bars (L5, L6, L8): a group per `index` value in
    `rows` order, a bar per `columns` value (named by `label`) in `series` order, the `agg` of
    `value` over finished runs; a cell without one is marked with its status ("n/a" for
    unsupported: no recipe or kernel here), or "no run"."""
    fig, axes = plt.subplots(1, len(panels), figsize=figsize, sharey=sharey, squeeze=False)
    palette = colours(series)
    ok = df[df["status"] == "ok"]

    def cells(w: pd.DataFrame) -> pd.DataFrame:
        return (w.rename(columns=label) if label else w).reindex(index=rows, columns=series)

    for ax, p in zip(axes[0], panels, strict=True):
        wide = ok[ok[panel] == p].pivot_table(index=index, columns=columns, values=value,
                                              aggfunc=agg)  # fmt: skip
        st = df[df[panel] == p].pivot_table(index=index, columns=columns, values="status",
                                            aggfunc=status)  # fmt: skip
        # object: a panel whose cells are all missing pivots to float NaN, which pandas 4 fills
        # with a string no longer
        marks = st.where(st != "ok", "").replace("unsupported", "n/a")
        bars(ax, cells(wide), palette=palette, marks=cells(marks).astype(object).fillna("no run"))
    return fig, list(axes[0])


def time_bars_figure(
    by: str,
    title: str,
    width: float = 6.0,
    dali: bool = True,
    note: Callable[[list[str], dict], str] | None = None,
) -> Callable[[pd.DataFrame, dict], plt.Figure]:
    """The figure of median total time (V8, V10, V11): a group per GPU count, a bar per value of
    `by` in table order; `title`'s "{runs}" filled in; `dali` says where DALI decoded on the CPU
    (no GPU: not the pipeline the paper timed); `note(series drawn, meta)`, if any, in red."""

    def figure(df: pd.DataFrame, meta: dict) -> plt.Figure:
        fig, ax = plt.subplots(figsize=(width, 3.6))
        ok = df[df["status"] == "ok"]
        drawn = list(dict.fromkeys(ok[by].astype(str)))
        med = ok.assign(**{by: ok[by].astype(str)}).groupby([by, "gpus"])["total_time_s"].median()
        bars(ax, med.unstack(by).reindex(columns=drawn))
        ax.set(xlabel="GPUs (ranks)", ylabel="total time [s]")
        legend(ax)
        why = note(drawn, meta) if note else ""
        if why:
            ax.set_title(why, fontsize=8, color="darkred")
        runs = runs_per_bar(df, [by, "gpus"])
        cpu = dali and (meta.get("gates") or {}).get("gpu")
        fig.suptitle(f"{title.format(runs=runs)}{CPU_DALI if cpu else ''}\n"
                     f"{subtitle(meta)}", fontsize=10)  # fmt: skip
        fig.tight_layout()  # the title's lines above the axes, not over them
        return fig

    return figure


def wrap_phrases(text: str, width: int) -> str:
    """`text` in lines of at most `width` where it can be, broken only between phrases (after
    , ; : outside parentheses): a title broken mid-phrase reads as two wrong ones."""
    phrases, depth, cur = [], 0, ""
    for ch in text:
        if ch == " " and depth == 0 and cur.endswith((",", ";", ":")):
            phrases.append(cur)
            cur = ""
            continue
        depth += (ch == "(") - (ch == ")")
        cur += ch
    phrases.append(cur)
    lines = [phrases[0]]
    for p in phrases[1:]:
        if len(lines[-1]) + 1 + len(p) <= width:
            lines[-1] += " " + p
        else:
            lines.append(p)
    return "\n".join(lines)


def runs_per_bar(df: pd.DataFrame, keys: list[str]) -> str:
    """How many finished runs each drawn value is the median of, in words ("one run each"): a
    reader must know to weigh a single run's noise."""
    ok = df[df["status"] == "ok"] if "run" in df else df.iloc[:0]
    n = ok.groupby(keys)["run"].nunique() if len(ok) else pd.Series(dtype=int)
    if n.empty or n.max() <= 1:
        return "one run each"
    lo, hi = int(n.min()), int(n.max())
    return f"median of {lo} runs each" if lo == hi else f"median of {lo}-{hi} runs each"


def subtitle(meta: dict) -> str:
    return f"{meta['source']} | measured, scale '{meta['scale']}'"
