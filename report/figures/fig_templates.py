"""L5: s/it by template and method (LoRA, QLoRA, DPO, QAT), one panel per GPU count, with our
template subsets' token counts against the paper's underneath (fig-templates-tokens.csv)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from report.figures import common
from run import store

TARGET = "fig-templates"
TEMPLATES = ["Instruct", "Summary", "Error Correction"]
METHODS = ["LoRA", "QLoRA", "DPO", "QAT"]
COLOURS = dict(zip(METHODS, ["tab:blue", "tab:orange", "tab:green", "tab:red"], strict=True))


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


def draw(df: pd.DataFrame, meta: dict) -> plt.Figure:
    gpus = sorted(df["gpus"].unique())
    fig, axes = plt.subplots(1, len(gpus), figsize=(5.2 * len(gpus), 3.9), sharey=True)
    axes = np.atleast_1d(axes)
    x = np.arange(len(TEMPLATES))
    width = 0.8 / len(METHODS)
    top = df["s_per_it"].max()
    for ax, g in zip(axes, gpus, strict=True):
        for i, m in enumerate(METHODS):
            d = df[(df["gpus"] == g) & (df["method_label"] == m)].set_index("template")
            d = d.reindex(TEMPLATES)
            pos = x + (i - (len(METHODS) - 1) / 2) * width
            ax.bar(pos, d["s_per_it"].fillna(0), width, label=m, color=COLOURS[m])
            for p, st in zip(pos, d["status"], strict=True):
                if isinstance(st, str) and st != "ok":
                    ax.text(
                        p,
                        0.02 * top,
                        st if st != "unsupported" else "n/a",
                        rotation=90,
                        ha="center",
                        va="bottom",
                        fontsize=7,
                        color="dimgrey",
                    )
        ax.set_xticks(x, TEMPLATES)
        ax.set_title(f"{g} GPU" + ("s" if g > 1 else "") + " (ranks on CPU)")
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("mean iteration time [s/it]")
    axes[-1].legend(fontsize=8)
    fig.suptitle(
        f"Iteration time by template and method (n/a = no torchtune recipe)\n"
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
