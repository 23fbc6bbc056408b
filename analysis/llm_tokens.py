"""Our LLM template subsets' token counts beside the paper's (fig-templates' tokens table)."""

from __future__ import annotations

import pandas as pd

from analysis.common import ok_runs, paper_table
from run.llm.catalog import TEMPLATE_LABELS
from run.llm.spec import TEMPLATE_DATASETS

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
    ok = ok_runs(df)
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


def tokens_vs_paper(ours: pd.DataFrame, paper_csv: str = "template_subsets.csv") -> pd.DataFrame:
    """Our template subsets' token counts (`ours`: template, tokenizer, rows, tokens) beside the
    paper's (`paper_csv`), with the ratio, the difference in percent and a note per subset.

    A subset of the paper's row count is compared by its total; one of another size (the smoke
    scale's 16 rows against the paper's 500) by tokens per row, and its note says so: the total
    of a smaller subset says nothing about how our rows compare with the paper's. Templates the
    paper lists no count for are left out.
    """
    paper = paper_table(paper_csv).set_index("template")
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
