"""L5 (J Fig.13): mean iteration time (s/it) by template, method (LoRA, QLoRA, DPO, QAT) and GPUs.

Cells that torchtune 0.6.1 cannot run (QLoRA on several devices, QAT on one) are rows with status
`unsupported`. The paper's template-subset sizes (reference/paper/template_subsets.csv) are shown
beside; our subsets' token counts come from the runs' summaries (`dataset_tokens`, counted by the
recipe extension over the training set as the model sees it). Since time follows size (L5d), a
second table, <target>-tokens.csv, sets our counts per template and tokenizer against the paper's
(per row when our subsets are smaller than its 500 rows) and a note per template says whether they
are within 15 % or by how much they differ.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from analysis import common as c
from run import store

TARGET, EXP = "fig-templates", "L5"
TOKENS_SUFFIX = "-tokens"  # results/<profile>/tables/fig-templates-tokens.csv
SIMILAR = 0.25  # "Instruct and Summary similar": s/it within 25 % of each other


def build_table(df: pd.DataFrame) -> pd.DataFrame:
    df = df.copy()
    for col in ("s_per_it", "steps", "dataset_rows", "dataset_tokens", "error"):
        if col not in df:
            df[col] = None
    df["template"] = df["dataset"].map(c.LLM_TEMPLATE_LABELS)
    df["method_label"] = df["method"].map(c.LLM_METHOD_LABELS)
    df["_t"] = df["dataset"].map(c.LLM_TEMPLATES.index)
    df["_m"] = df["method"].map(c.LLM_METHODS.index)
    df = df.sort_values(["gpus", "_m", "_t"])
    for col in ("steps", "dataset_rows", "dataset_tokens"):
        df[col] = pd.to_numeric(df[col]).astype("Int64")
    # the first clause of the run's error ("QAT needs several devices"); summary.json keeps it all
    df["reason"] = [
        str(e).split(":")[0] if s != "ok" and isinstance(e, str) else None
        for e, s in zip(df["error"], df["status"], strict=True)
    ]
    return df[
        [
            "template",
            "dataset",
            "method",
            "method_label",
            "gpus",
            "s_per_it",
            "steps",
            "dataset_rows",
            "dataset_tokens",
            "status",
            "reason",
            "run",
        ]
    ]


def _sit(ok: pd.DataFrame) -> dict[tuple[str, str, int], float]:
    return {
        (r["dataset"], r["method"], int(r["gpus"])): float(r["s_per_it"]) for _, r in ok.iterrows()
    }


def claims(t: pd.DataFrame) -> list[dict[str, str]]:
    ok = c.ok_runs(t).dropna(subset=["s_per_it"])
    sit = _sit(ok)
    gpus = sorted({g for *_, g in sit})
    multi = [g for g in gpus if g > 1]
    out = []

    def fmt(d: str, m: str, g: int) -> str:
        return f"{c.LLM_METHOD_LABELS[m]} {sit[(d, m, g)]:.3f}"

    # L5a: LoRA fastest in every (template, GPUs) cell
    checks, parts = [], []
    for g in gpus:
        for d in c.LLM_TEMPLATES:
            if (d, "lora", g) not in sit:
                continue
            others = [m for m in c.LLM_METHODS if m != "lora" and (d, m, g) in sit]
            if not others:
                continue
            checks.append(all(sit[(d, "lora", g)] < sit[(d, m, g)] for m in others))
            parts.append(
                f"{c.LLM_TEMPLATE_LABELS[d]}@{g}: "
                + ", ".join(fmt(d, m, g) for m in ["lora", *others])
            )
    out.append(
        c.claim(
            "L5a",
            "LoRA is the fastest method",
            "in every template and GPU count, LoRA's s/it is below every other method that ran",
            c.judged(all(checks) if checks else None),
            "; ".join(parts) + " s/it" if parts else "no cell with LoRA and another method",
        )
    )

    # L5b: QLoRA (1 GPU) and QAT (several) are the slowest at their GPU counts
    checks, parts = [], []
    for d in c.LLM_TEMPLATES:
        for m, g in [("qlora", 1)] + [("qat", g) for g in multi]:
            rivals = [o for o in ("lora", "dpo") if (d, o, g) in sit]
            if (d, m, g) in sit and rivals:
                checks.append(all(sit[(d, m, g)] > sit[(d, o, g)] for o in rivals))
                parts.append(
                    f"{c.LLM_TEMPLATE_LABELS[d]}@{g}: "
                    + ", ".join(fmt(d, x, g) for x in [m, *rivals])
                )
    out.append(
        c.claim(
            "L5b",
            "QLoRA and QAT are the slowest methods",
            "in every template, QLoRA's s/it (1 GPU) and QAT's (each multi-GPU count) exceed "
            "LoRA's and DPO's at the same GPU count",
            c.judged(all(checks) if checks else None),
            "; ".join(parts) + " s/it" if parts else "no QLoRA or QAT cell beside LoRA/DPO",
        )
    )

    # L5c: QAT slower than DPO
    checks, parts = [], []
    for g in multi:
        for d in c.LLM_TEMPLATES:
            if (d, "qat", g) in sit and (d, "dpo", g) in sit:
                checks.append(sit[(d, "qat", g)] > sit[(d, "dpo", g)])
                parts.append(
                    f"{c.LLM_TEMPLATE_LABELS[d]}@{g}: {fmt(d, 'qat', g)}, {fmt(d, 'dpo', g)}"
                )
    out.append(
        c.claim(
            "L5c",
            "QAT is slower than DPO",
            "in every template and GPU count where both ran, QAT's s/it exceeds DPO's",
            c.judged(all(checks) if checks else None),
            "; ".join(parts) + " s/it" if parts else "no GPU count with both QAT and DPO",
        )
    )

    # L5d: Error Correction fastest; Instruct and Summary similar
    fastest, similar, parts = [], [], []
    for g in gpus:
        for m in c.LLM_METHODS:
            v = {d: sit[(d, m, g)] for d in c.LLM_TEMPLATES if (d, m, g) in sit}
            if len(v) < 3:
                continue
            fastest.append(v["error-correction"] < min(v["instruct"], v["summary"]))
            ratio = v["summary"] / v["instruct"]
            similar.append(abs(ratio - 1) <= SIMILAR)
            parts.append(
                f"{c.LLM_METHOD_LABELS[m]}@{g}: I {v['instruct']:.3f} / S {v['summary']:.3f} / "
                f"EC {v['error-correction']:.3f} (S/I {ratio:.2f})"
            )
    ok_all = bool(fastest) and all(fastest) and all(similar)
    ev = "; ".join(parts) + " s/it" if parts else "no method and GPU count with all 3 templates"
    if parts:
        ev += (
            f". Error Correction fastest in {sum(fastest)}/{len(fastest)}, Instruct and Summary "
            f"within {100 * SIMILAR:.0f} % in {sum(similar)}/{len(similar)}"
        )
    out.append(
        c.claim(
            "L5d",
            "Error Correction is fastest; Instruct and Summary are similar (time follows size)",
            "in every method and GPU count, Error Correction has the lowest s/it and Summary's "
            f"s/it is within {100 * SIMILAR:.0f} % of Instruct's",
            c.judged(ok_all if parts else None),
            ev,
        )
    )
    return out


def token_table(df: pd.DataFrame) -> pd.DataFrame:
    """Our template subsets' token counts (SFT runs) per template and tokenizer beside the
    paper's, with ratio and difference (analysis.common.tokens_vs_paper)."""
    return c.tokens_vs_paper(c.llm_subset_tokens(df))


def tokens_path(profile: str) -> Path:
    return store.tables_dir(profile) / f"{TARGET}{TOKENS_SUFFIX}.csv"


def token_notes(tokens: pd.DataFrame) -> list[str]:
    """A summary line (our counts and the paper's), where the table is, and one line per template
    saying whether it is within 15 % of the paper's or by how much it differs."""
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
        f"Ratios and differences to the paper's: tables/{TARGET}{TOKENS_SUFFIX}.csv.",
        *(f"Tokens vs paper, {n}" for n in tokens["note"]),
    ]


def build(profile: str) -> Path:
    df, skipped = c.experiment_runs(EXP, profile)
    table = build_table(df)
    notes = c.llm_cpu_notes(df)
    tokens = token_table(df)
    notes += token_notes(tokens)
    # written even when empty, so that a rebuild never leaves an older run's counts behind
    store.write_text_atomic(tokens_path(profile), tokens.drop(columns="note").to_csv(index=False))
    unsupported = table[table["status"] == "unsupported"]
    if len(unsupported):
        cells = ", ".join(
            f"{r['method_label']} {int(r['gpus'])} GPU" for _, r in unsupported.iterrows()
        )
        notes.append(
            f"Unsupported cells (torchtune 0.6.1 has no recipe for them): {', '.join(sorted(set(cells.split(', '))))}."
        )
    return c.write_artifact(
        TARGET,
        profile,
        table,
        experiments=[EXP],
        claims=claims(table),
        notes=notes,
        paper_csv="template_subsets.csv",
        skipped=skipped,
        figure=True,
    )


if __name__ == "__main__":
    c.main_for(build, __doc__)
