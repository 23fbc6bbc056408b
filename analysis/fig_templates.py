"""L5 (J Fig.13): mean iteration time (s/it) by template, method (LoRA, QLoRA, DPO, QAT) and GPUs.

Cells that torchtune 0.6.1 cannot run (QLoRA on several devices, QAT on one) are rows with status
`unsupported`. The paper's template-subset sizes (reference/paper/template_subsets.csv) are shown
beside; our subsets' token counts come from the runs' summaries (`dataset_tokens`, counted by the
recipe extension over the training set as the model sees it).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from analysis import common as c

TARGET, EXP = "fig-templates", "L5"
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


def token_note(df: pd.DataFrame) -> str | None:
    """Our template subsets beside the paper's, from the LoRA (SFT) runs' dataset_tokens."""
    ok = c.ok_runs(df)
    if "dataset_tokens" not in ok:
        return None
    sft = ok[(ok["method"] == "lora") & ok["dataset_tokens"].notna()]
    if not len(sft):
        return None
    paper = c.paper_table("template_subsets.csv").set_index("template")
    parts = []
    for d in c.LLM_TEMPLATES:
        rows = sft[sft["dataset"] == d]
        if not len(rows):
            continue
        r = rows.iloc[0]
        label = c.LLM_TEMPLATE_LABELS[d]
        p = paper.loc[label]
        parts.append(
            f"{label} {int(r['dataset_tokens']):,} tokens in {int(r['dataset_rows'])} rows "
            f"(paper: {int(p['tokens']):,} in {int(p['rows'])})"
        )
    tok = ", ".join(sorted(set(ok.get("tokenizer", pd.Series(dtype=str)).dropna()))) or "?"
    return f"Template subsets, as tokenised for SFT (tokenizer {tok}): " + "; ".join(parts) + "."


def build(profile: str) -> Path:
    df, skipped = c.experiment_runs(EXP, profile)
    table = build_table(df)
    notes = c.llm_cpu_notes(df)
    note = token_note(df)
    if note:
        notes.append(note)
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
