"""L5: s/it by template and method (LoRA, QLoRA, DPO, QAT), one panel per GPU count, with our
template subsets' token counts against the paper's underneath (fig-templates-tokens.csv)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from analysis import draw as common
from run import store
from run.llm.catalog import TEMPLATE_LABELS
from run.llm.spec import METHOD_LABELS

TARGET = "fig-templates"
TEMPLATES = list(TEMPLATE_LABELS.values())
METHODS = list(METHOD_LABELS.values())


def _on_cpu(meta: dict) -> bool:
    """Whether the runs used CPU ranks: the `gpu` gate names why a GPU claim was not judged."""
    return bool((meta.get("gates") or {}).get("gpu"))


def token_lines(meta: dict) -> list[str]:
    """One line per template: our tokens (per row where the subsets differ in size) and the
    paper's, since s/it follows subset size and ours are not tokenised as the paper's were."""
    path = store.tables_dir(meta["profile"]) / f"{TARGET}-tokens.csv"
    if not path.is_file():
        return []
    t = pd.read_csv(path)
    lines = ["Template subsets' tokens vs the paper's:"] if len(t) else []
    for _, r in t.iterrows():
        if r["basis"] == "per row":
            ours = f"{r['tokens_per_row']:.1f} tokens/row ({int(r['rows'])} rows)"
            paper = f"{r['paper_tokens_per_row']:.1f} ({int(r['paper_rows'])} rows)"
        else:
            ours = f"{int(r['tokens']):,} tokens ({int(r['rows'])} rows)"
            paper = f"{int(r['paper_tokens']):,}"
        lines.append(
            f"{r['template']}: {ours}, paper {paper}: {r['diff_pct']:+.0f} % "
            f"(tokenizer {r['tokenizer']})"
        )
    return lines


def series(df: pd.DataFrame) -> list[str]:
    """The same four methods in every panel, in the paper's order."""
    return METHODS


def draw(df: pd.DataFrame, meta: dict) -> plt.Figure:
    gpus = sorted(df["gpus"].unique())
    fig, axes = plt.subplots(1, len(gpus), figsize=(5.2 * len(gpus), 3.9), sharey=True)
    axes = np.atleast_1d(axes)
    palette = common.colours(METHODS)
    ok = df[df["status"] == "ok"]
    for ax, g in zip(axes, gpus, strict=True):
        wide = ok[ok["gpus"] == g].pivot_table(
            index="template", columns="method_label", values="s_per_it", aggfunc="median"
        )
        marks = common.status_marks(df[df["gpus"] == g], "template", "method_label")
        cells = {"index": TEMPLATES, "columns": METHODS}
        common.bars(ax, wide.reindex(**cells), palette=palette,
                    marks=marks.reindex(**cells).fillna("no run"))  # fmt: skip
        ax.set_title(common.gpus_label(g) + (" (ranks on CPU)" if _on_cpu(meta) else ""),
                     fontsize=9)  # fmt: skip
    axes[0].set_ylabel("mean iteration time [s/it]")
    common.legend(axes[-1], fig=fig)
    fig.suptitle(
        f"Iteration time by template and method (n/a = no torchtune recipe; "
        f"{common.runs_per_bar(df, ['template', 'method_label', 'gpus'])})\n"
        f"{common.subtitle(meta)}",
        fontsize=10,
    )
    fig.tight_layout()
    lines = token_lines(meta)
    if lines:
        # below the axes: savefig's tight bounding box takes the text in
        fig.text(0.5, -0.01, "\n".join(lines), ha="center", va="top", fontsize=8, color="dimgrey")
    return fig


if __name__ == "__main__":
    common.main_for(draw, TARGET)
