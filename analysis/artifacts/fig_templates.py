"""L5 (J Fig.13): mean iteration time (s/it) by template, method (LoRA, QLoRA, DPO, QAT) and GPUs.

Cells torchtune 0.6.1 cannot run (QLoRA on several devices, QAT on one) are rows `unsupported`.
Since time follows size (L5d), <target>-tokens.csv sets our subsets' token counts (the runs'
`dataset_tokens`, counted as the model sees them) per template and tokenizer against the paper's
sizes (reference/paper/template_subsets.csv; per row where ours have fewer than its 500 rows). No
claim on them: the paper published no s/it numbers (no paper() table, no self-check).
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from analysis import common as c
from analysis import draw
from analysis import steady as st
from analysis.driver import Artifact
from run import store
from run.llm.catalog import TEMPLATE_LABELS
from run.llm.spec import METHOD_LABELS, METHODS, TEMPLATE_DATASETS

PAPER_CSV = "template_subsets.csv"  # the subsets' sizes: set beside ours in the tokens table
KEYS = ["template", "method"]
TARGET = "fig-templates"
TOKENS = "tokens"  # extra(): results/<scale>/tables/fig-templates-tokens.csv
COLUMNS = ["template", "dataset", "method", "method_label", "gpus", "s_per_it", "steps",
           "dataset_rows", "dataset_tokens", "status", "reason", "run"]  # fmt: skip


TEMPLATES = list(TEMPLATE_LABELS.values())
METHOD_NAMES = list(METHOD_LABELS.values())


def llm_cells(runs: pd.DataFrame, columns: tuple[str, ...], methods: list[str]) -> pd.DataFrame:
    """`runs` with `columns` (None where absent), the papers' template and method labels, and
    _t, _m: their places in the papers' orders (shared by L5, L6, L8)."""
    df = runs.copy()
    for col in columns:
        if col not in df:
            df[col] = None
    return df.assign(template=df["dataset"].map(TEMPLATE_LABELS),
                     method_label=df["method"].map(METHOD_LABELS),
                     _t=df["dataset"].map(TEMPLATE_DATASETS.index),
                     _m=df["method"].map(methods.index))  # fmt: skip


def by_gpus(t: pd.DataFrame, keys: list[str], value: str, unit: str, methods: list[str]):
    """Template x method as rows (the papers' order), `value` per GPU count as columns; a cell
    that did not finish shows its status (oom, unsupported)."""
    t = t.assign(method=t["method_label"]) if "method_label" in t else t
    order = {"template": TEMPLATES, "method": [METHOD_LABELS[m] for m in methods]}
    name = {value: lambda g: f"{c.gpus_label(g)} [{unit}]"}
    return c.pivot(t, keys, "gpus", name, rows=order, fill_status=True)


def table(runs: pd.DataFrame, scale: str) -> pd.DataFrame:
    if runs.empty:
        return pd.DataFrame(columns=COLUMNS)
    cols = ("s_per_it", "steps", "dataset_rows", "dataset_tokens", "error")
    df = llm_cells(runs, cols, METHODS).sort_values(["gpus", "_m", "_t"])
    for col in ("steps", "dataset_rows", "dataset_tokens"):
        df[col] = pd.to_numeric(df[col]).astype("Int64")
    df["reason"] = c.reasons(df)
    df = st.llm_steady(df, scale)
    return df[COLUMNS + st.steady_cols(df, "s_per_it")]


def compact(t: pd.DataFrame) -> pd.DataFrame:
    return by_gpus(t, KEYS, "s_per_it", "s/it", METHODS)


TOKENS_WITHIN_PCT = 15.0  # "comparable to the paper's template subsets": within 15 % in tokens
TOKENIZER_NOTES = {"bytes": "one token per byte"}
LLM_SFT_METHODS = ("lora", "qlora", "qat")  # count each row once; DPO counts chosen + rejected
TOKENS_COLUMNS = (
    "template tokenizer rows tokens tokens_per_row paper_rows paper_tokens paper_tokens_per_row "
    "basis ratio diff_pct within note"
).split()


def llm_subset_tokens(df: pd.DataFrame) -> pd.DataFrame:
    """Our template subsets' token counts from LLM run rows (spec + summary): one row per
    (template, tokenizer) with rows and tokens, from the first finished SFT run that counted them
    (every SFT method tokenises the same rows alike; LoRA is preferred, being in every scale)."""
    cols = ["template", "tokenizer", "rows", "tokens"]
    ok = c.ok_runs(df)
    if not len(ok) or "dataset_tokens" not in ok:
        return pd.DataFrame(columns=cols)
    ok = ok[ok["method"].isin(LLM_SFT_METHODS) & ok["dataset"].isin(TEMPLATE_DATASETS)]
    ok = ok[ok["dataset_tokens"].notna()].copy()
    if "tokenizer" not in ok:
        ok["tokenizer"] = None
    rows_col = ok["dataset_rows"] if "dataset_rows" in ok else pd.Series(index=ok.index)
    ok["rows"] = rows_col.fillna(ok.get("template_rows", pd.Series(index=ok.index)))
    ok = ok[ok["rows"].notna()]
    ok["_m"] = ok["method"].map(LLM_SFT_METHODS.index)
    ok["_t"] = ok["dataset"].map(TEMPLATE_DATASETS.index)
    ok["tokenizer"] = ok["tokenizer"].fillna("?")
    first = ok.sort_values(["_t", "_m"]).drop_duplicates(["dataset", "tokenizer"])
    return pd.DataFrame(
        {
            "template": first["dataset"].map(TEMPLATE_LABELS).to_numpy(),
            "tokenizer": first["tokenizer"].to_numpy(),
            "rows": first["rows"].astype(int).to_numpy(),
            "tokens": first["dataset_tokens"].astype(int).to_numpy(),
        },
        columns=cols,
    )


def _signed_pct(d: float) -> str:
    return f"{d:+.1f} %" if abs(d) < 10 else f"{d:+.0f} %"


def tokens_vs_paper(ours: pd.DataFrame) -> pd.DataFrame:
    """Our template subsets' token counts (`ours`: template, tokenizer, rows, tokens) beside the
    paper's (PAPER_CSV), with the ratio, the difference in percent and a note per subset.

    A subset of the paper's row count is compared by its total; one of another size (the smoke
    scale's 16 rows against the paper's 500) by tokens per row, and its note says so: the total
    of a smaller subset says nothing about how our rows compare with the paper's. Templates the
    paper lists no count for are left out.
    """
    paper = c.paper_table(PAPER_CSV).set_index("template")
    out = []
    for _, r in ours.iterrows():
        label = r["template"]
        if label not in paper.index:
            continue
        p = paper.loc[label]
        rows, tokens = int(r["rows"]), int(r["tokens"])
        p_rows, p_tokens = int(p["rows"]), int(p["tokens"])
        per_row = rows != p_rows
        tpr, p_tpr = tokens / rows, p_tokens / p_rows
        ratio = tpr / p_tpr if per_row else tokens / p_tokens
        diff = 100.0 * (ratio - 1.0)
        within = abs(diff) <= TOKENS_WITHIN_PCT
        tok = str(r["tokenizer"])
        if per_row:
            ours_txt = f"{tokens:,} tokens in {rows} rows = {tpr:.1f} per row"
            paper_txt = f"{p_tpr:.1f} per row ({p_tokens:,} tokens in {p_rows} rows; "
        else:
            ours_txt = f"{tokens:,} tokens in {rows} rows"
            paper_txt = f"{p_tokens:,} tokens in {p_rows} rows ("
        if within:
            verdict = f"within {TOKENS_WITHIN_PCT:g} % of the paper's"
        else:
            verdict = f"{abs(diff):.0f} % {'more' if diff > 0 else 'fewer'} tokens than the paper's"
        detail = [
            f"{_signed_pct(diff)}, ratio {ratio:.2f}",
            f"tokenizer {tok}" + (f": {TOKENIZER_NOTES[tok]}" if tok in TOKENIZER_NOTES else ""),
        ]
        if per_row:
            detail.append(
                f"compared per row because this subset has {rows} rows, the paper's {p_rows}"
            )
        note = f"{label}: {ours_txt}, {verdict} {paper_txt}{'; '.join(detail)})."
        out.append(
            {"template": label, "tokenizer": tok, "rows": rows, "tokens": tokens,
             "tokens_per_row": round(tpr, 2), "paper_rows": p_rows, "paper_tokens": p_tokens,
             "paper_tokens_per_row": round(p_tpr, 2), "basis": "per row" if per_row else "total",
             "ratio": round(ratio, 4), "diff_pct": round(diff, 2), "within": within, "note": note}
        )  # fmt: skip
    return pd.DataFrame(out, columns=TOKENS_COLUMNS)


def token_table(runs: pd.DataFrame) -> pd.DataFrame:
    return tokens_vs_paper(llm_subset_tokens(runs))


def token_notes(tokens: pd.DataFrame) -> list[str]:
    if not len(tokens):
        return []
    parts = [
        f"{r['template']} {int(r['tokens']):,} tokens in {int(r['rows'])} rows "
        f"(paper: {int(r['paper_tokens']):,} in {int(r['paper_rows'])})"
        for _, r in tokens.iterrows()
    ]
    tok = ", ".join(sorted(set(tokens["tokenizer"])))
    return [
        f"Template subsets, as tokenised for SFT (tokenizer {tok}): " + "; ".join(parts) + ". "
        f"Ratios and differences to the paper's: tables/{TARGET}-{TOKENS}.csv.",
        *(f"Tokens vs paper, {n}" for n in tokens["note"]),
    ]


def notes(runs: pd.DataFrame, t: pd.DataFrame) -> list[str]:
    out = c.llm_cpu_notes(runs) + token_notes(token_table(runs))
    unsupported = t[t["status"] == "unsupported"] if len(t) else t
    if len(unsupported):
        cells = sorted({f"{r['method_label']} {int(r['gpus'])} GPU" for _, r in
                        unsupported.iterrows()})  # fmt: skip
        out.append(
            f"Unsupported cells (torchtune 0.6.1 has no recipe for them): {', '.join(cells)}."
        )
    return out


def extra(runs: pd.DataFrame, t: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Written even when empty: a rebuild never leaves an older run's counts behind."""
    return {TOKENS: token_table(runs).drop(columns="note")}


def _on_cpu(meta: dict) -> bool:
    return bool((meta.get("gates") or {}).get("gpu"))


def token_lines(meta: dict) -> list[str]:
    """One line per template: our tokens and the paper's (s/it follows subset size)."""
    path = store.tables_dir(meta["scale"]) / f"{TARGET}-tokens.csv"
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


def figure(df: pd.DataFrame, meta: dict) -> plt.Figure:
    gpus = sorted(df["gpus"].unique())
    fig, axes = draw.panel_bars(df, "gpus", gpus, "template", TEMPLATES, "method_label",
                                METHOD_NAMES, "s_per_it", figsize=(5.2 * len(gpus), 3.9))  # fmt: skip
    for ax, g in zip(axes, gpus, strict=True):
        ax.set_title(draw.gpus_label(g) + (" (ranks on CPU)" if _on_cpu(meta) else ""),
                     fontsize=9)  # fmt: skip
    axes[0].set_ylabel("mean iteration time [s/it]")
    draw.legend(axes[-1], fig=fig)
    fig.suptitle(
        f"Iteration time by template and method (n/a = no torchtune recipe; "
        f"{draw.runs_per_bar(df, ['template', 'method_label', 'gpus'])})\n"
        f"{draw.subtitle(meta)}",
        fontsize=10,
    )
    fig.tight_layout()
    lines = token_lines(meta)
    if lines:
        # below the axes: savefig's tight bounding box takes the text in
        fig.text(0.5, -0.01, "\n".join(lines), ha="center", va="top", fontsize=8, color="dimgrey")
    return fig


ARTIFACT = Artifact(
    table=table,
    compact=compact,
    keys=KEYS,
    paper_csv=PAPER_CSV,
    notes=notes,
    gates=c.real_data_gate,
    extra=extra,
    figure=figure,
)
