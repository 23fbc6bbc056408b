"""L8 (J Fig.16): peak memory by template, method and GPU count.

On GPUs the value is torchtune's peak active memory per GPU in the run's last step (rank 0,
`log_peak_memory_stats`, whose counters are reset after each step), as the paper read its logs;
the maximum over all steps (often the first, before the allocator settles) is the second column. Without a GPU it is the peak resident set size of rank 0's process
(`memory_kind` host_peak_rss): host memory, which the paper does not measure, so the VRAM claims
are then "not measured" and the numbers are shown for what they are. Unsupported and
out-of-memory cells are rows with their status.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from analysis import common as c

TARGET, EXP = "fig-vram", "L8"
GIB = 1024**3
DOUBLES = 1.5  # "doubles": at least 1.5x
PROPORTIONAL = 0.25  # "falls in proportion": within 25 % of mem(2) * 2 / n
SLIGHT_DROP = (0.70, 1.0)  # "drops slightly": 0-30 % lower
FLAT = 0.10


def build_table(df: pd.DataFrame) -> pd.DataFrame:
    df = df.copy()
    for col in ("peak_memory_bytes", "peak_memory_max_bytes", "memory_kind", "error"):
        if col not in df:
            df[col] = None
    df["template"] = df["dataset"].map(c.LLM_TEMPLATE_LABELS)
    df["method_label"] = df["method"].map(c.LLM_METHOD_LABELS)
    for src, dst in (
        ("peak_memory_bytes", "peak_memory_gib"),
        ("peak_memory_max_bytes", "peak_memory_max_gib"),
    ):
        df[dst] = [
            b / GIB if s == "ok" and pd.notna(b) else None
            for b, s in zip(df[src], df["status"], strict=True)
        ]
    # the first clause of the run's error ("QAT needs several devices"); summary.json keeps it all
    df["reason"] = [
        str(e).split(":")[0] if s != "ok" and isinstance(e, str) else None
        for e, s in zip(df["error"], df["status"], strict=True)
    ]
    df["_t"] = df["dataset"].map(c.LLM_TEMPLATES.index)
    df["_m"] = df["method"].map(c.LLM_METHODS.index)
    df = df.sort_values(["_m", "_t", "gpus"])
    return df[
        [
            "template",
            "dataset",
            "method",
            "method_label",
            "gpus",
            "peak_memory_gib",
            "peak_memory_max_gib",
            "memory_kind",
            "status",
            "reason",
            "run",
        ]
    ]


def _judge(t: pd.DataFrame) -> dict[str, tuple[bool | None, str]]:
    """Verdict inputs of L8a-c and L8e from peak memory per GPU (GPU runs only)."""
    ok = c.ok_runs(t).dropna(subset=["peak_memory_gib"])
    mem = {
        (r["dataset"], r["method"], int(r["gpus"])): r["peak_memory_gib"] for _, r in ok.iterrows()
    }
    gpus = sorted({g for *_, g in mem})
    out: dict[str, tuple[bool | None, str]] = {}

    def series(m: str) -> tuple[list[bool], list[bool], list[str]]:
        up, after, parts = [], [], []
        for d in c.LLM_TEMPLATES:
            if (d, m, 1) in mem and (d, m, 2) in mem:
                parts.append(
                    f"{c.LLM_TEMPLATE_LABELS[d]}: "
                    + ", ".join(f"{g}: {mem[(d, m, g)]:.2f}" for g in gpus if (d, m, g) in mem)
                    + " GiB"
                )
                up.append(mem[(d, m, 2)] / mem[(d, m, 1)])
                after.extend(
                    mem[(d, m, g)] / mem[(d, m, 2)] for g in gpus if g > 2 and (d, m, g) in mem
                )
        return up, after, parts  # type: ignore[return-value]

    need = 1 in gpus and 2 in gpus and any(g > 2 for g in gpus)
    up, after, parts = series("dpo")
    ok_a = None
    if need and up and after:
        higher = [g for g in gpus if g > 2]
        prop = [
            abs(mem[(d, "dpo", g)] / (mem[(d, "dpo", 2)] * 2 / g) - 1) <= PROPORTIONAL
            for d in c.LLM_TEMPLATES
            for g in higher
            if (d, "dpo", g) in mem and (d, "dpo", 2) in mem
        ]
        ok_a = all(r >= DOUBLES for r in up) and all(prop)
    out["L8a"] = (ok_a, "; ".join(parts) or "no DPO runs at 1 and 2 GPUs")

    up, after, parts = series("lora")
    ok_b = None
    if need and up and after:
        ok_b = all(SLIGHT_DROP[0] <= r < SLIGHT_DROP[1] for r in up) and all(
            abs(r - 1) <= FLAT for r in after
        )
    out["L8b"] = (ok_b, "; ".join(parts) or "no LoRA runs at 1 and 2 GPUs")

    checks, parts = [], []
    for d in c.LLM_TEMPLATES:
        if (d, "qlora", 1) in mem:
            rivals = {m: mem[(d, m, 1)] for m in ("lora", "dpo") if (d, m, 1) in mem}
            if rivals:
                checks.append(all(mem[(d, "qlora", 1)] < v for v in rivals.values()))
                parts.append(
                    f"{c.LLM_TEMPLATE_LABELS[d]}@1: QLoRA {mem[(d, 'qlora', 1)]:.2f}, "
                    + ", ".join(f"{c.LLM_METHOD_LABELS[m]} {v:.2f}" for m, v in rivals.items())
                    + " GiB"
                )
    out["L8c"] = (all(checks) if checks else None, "; ".join(parts) or "no 1-GPU QLoRA run")

    checks, parts = [], []
    for g in gpus:
        for m in c.LLM_METHODS:
            v = {d: mem[(d, m, g)] for d in c.LLM_TEMPLATES if (d, m, g) in mem}
            if len(v) == 3:
                checks.append(v["error-correction"] < min(v["instruct"], v["summary"]))
                parts.append(
                    f"{c.LLM_METHOD_LABELS[m]}@{g}: I {v['instruct']:.2f} / S {v['summary']:.2f} "
                    f"/ EC {v['error-correction']:.2f}"
                )
    out["L8e"] = (all(checks) if checks else None, "; ".join(parts) or "no complete group")
    return out


def qat_oom(t: pd.DataFrame) -> tuple[bool | None, str]:
    """L8d from run statuses: QAT out of memory below 4 GPUs, fitting at 4."""
    q = t[t["method"] == "qat"]
    st = {(r["dataset"], int(r["gpus"])): r["status"] for _, r in q.iterrows()}
    ev = ", ".join(f"{c.LLM_TEMPLATE_LABELS[d]}@{g}: {s}" for (d, g), s in sorted(st.items()))
    below = [s for (_, g), s in st.items() if g < 4 and s != "unsupported"]
    at4 = [s for (_, g), s in st.items() if g >= 4]
    if not below or not at4:
        return None, (ev or "no QAT runs") + " (needs QAT runs on 2-3 and on 4 GPUs)"
    return all(s == "oom" for s in below) and all(s == "ok" for s in at4), ev


CLAIMS = {
    "L8a": (
        "DPO memory doubles at 2 GPUs, then falls in proportion to the GPUs",
        f"for every template, DPO peak at 2 GPUs >= {DOUBLES}x the 1-GPU peak, and at n > 2 GPUs "
        f"within {100 * PROPORTIONAL:.0f} % of peak(2) x 2 / n",
    ),
    "L8b": (
        "LoRA memory drops slightly at 2 GPUs, then stays flat",
        "for every template, LoRA peak at 2 GPUs 0-30 % below 1 GPU, and at n > 2 within "
        f"{100 * FLAT:.0f} % of 2 GPUs",
    ),
    "L8c": (
        "QLoRA needs the least memory",
        "for every template, QLoRA's 1-GPU peak is below LoRA's and DPO's 1-GPU peaks",
    ),
    "L8d": (
        "QAT runs out of memory on fewer than 4 GPUs",
        "every QAT run on 2-3 GPUs has status oom and every QAT run on 4 GPUs is ok",
    ),
    "L8e": (
        "Error Correction uses the least memory",
        "for every method and GPU count, the Error Correction peak is the lowest of the templates",
    ),
}


def claims(t: pd.DataFrame, gpu: bool) -> list[dict[str, str]]:
    judged = _judge(t)
    judged["L8d"] = qat_oom(t)
    out = []
    for cid, (text, criterion) in CLAIMS.items():
        ok, ev = judged[cid]
        if gpu:
            out.append(c.claim(cid, text, criterion, c.judged(ok), ev))
        else:
            why = (
                "Not measured: no GPU. The numbers are peak host RSS of rank 0 (the whole "
                "process: Python, torch and the tiny model), not VRAM"
                if cid != "L8d"
                else "Not measured: no GPU memory to run out of; QAT on 1 device is unsupported "
                "(torchtune 0.6.1 has no single-device QAT recipe), not out of memory"
            )
            out.append(c.claim(cid, text, criterion, c.UNMEASURED, f"{why}. {ev}"))
    return out


def build(profile: str) -> Path:
    df, skipped = c.experiment_runs(EXP, profile)
    table = build_table(df)
    gpu = c.on_gpu(df)
    notes = c.llm_cpu_notes(df)
    if not gpu:
        notes.append(
            "CPU run: peak_memory_gib is the peak resident set size of rank 0's process (host "
            "memory), labelled host_peak_rss; it is not VRAM and the paper has no such number."
        )
    return c.write_artifact(
        TARGET,
        profile,
        table,
        experiments=[EXP],
        claims=claims(table, gpu),
        notes=notes,
        paper_csv=None,
        skipped=skipped,
        figure=True,
    )


if __name__ == "__main__":
    c.main_for(build, __doc__)
