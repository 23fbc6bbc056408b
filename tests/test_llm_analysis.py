"""The LLM artifact scripts (L1, L2, L5, L6, L8) on small fake run folders: claim verdicts that
hold, fail or stay unmeasured depending on the numbers, tables with every cell, figures drawn."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from analysis import common as c
from analysis import fig_datasets, fig_template_scaling, fig_templates, fig_vram, table_llm_pinmem
from run import llm_spec, store
from run import matrix as mx

GIB = 1024**3
PROFILE = "test"


@pytest.fixture
def llm_sandbox(sandbox):
    """The sandbox matrix with the real L1, L2, L5, L6, L8 entries added."""
    path = sandbox / "matrix.yaml"
    m = yaml.safe_load(path.read_text())
    real = mx.load_matrix(Path(__file__).resolve().parents[1] / "experiments" / "matrix.yaml")
    for e in ("L1", "L2", "L5", "L6", "L8"):
        m["experiments"][e] = real["experiments"][e]
    path.write_text(yaml.safe_dump(m))
    return sandbox


def fake_runs(exp: str, rows: list[dict], skipped: list | None = None) -> None:
    """Run folders (spec.json + summary.json) and the sweep record of one experiment."""
    listed = []
    for row in rows:
        spec = {**llm_spec.DEFAULTS, "template_rows": 16}
        spec.update({k: v for k, v in row.items() if k in llm_spec.DEFAULTS})
        name = llm_spec.run_name(spec)
        summary = {k: v for k, v in row.items() if k not in llm_spec.DEFAULTS}
        summary.setdefault("status", "ok")
        summary.setdefault("device", "cpu")
        summary.setdefault("tokenizer", "bytes")
        summary["name"] = name
        d = store.run_dir(PROFILE, name)
        d.mkdir(parents=True, exist_ok=True)
        store.write_json_atomic(d / store.SPEC, spec)
        store.write_json_atomic(d / store.SUMMARY, summary)
        listed.append({"run": name, "status": summary["status"], "reused": False})
    store.write_json_atomic(
        store.sweeps_dir(PROFILE) / f"{exp}.json",
        {"experiment": exp, "runs": listed, "skipped": skipped or []},
    )


def verdicts(target: str) -> dict[str, str]:
    meta = json.loads((store.tables_dir(PROFILE) / f"{target}.json").read_text())
    return {cl["id"]: cl["verdict"] for cl in meta["claims"]}


def meta_of(target: str) -> dict:
    return json.loads((store.tables_dir(PROFILE) / f"{target}.json").read_text())


# ---------------------------------------------------------------- L1
L1_SIT = {"alpaca": 0.50, "grammar": 0.30, "samsum": 0.35, "slimorca": 0.55}


def l1_rows(scale2: float, swap: bool = False, gpus=(1, 2)) -> list[dict]:
    rows = []
    for d, s in L1_SIT.items():
        if swap and d in ("grammar", "alpaca"):
            s = L1_SIT["alpaca" if d == "grammar" else "grammar"]
        for g in gpus:
            sit = s * (1 if g == 1 else scale2)
            steps_per_epoch = 600 // g
            rows.append(
                {
                    "dataset": d,
                    "gpus": g,
                    "max_steps": 8,
                    "s_per_it": sit,
                    "steps": 8,
                    "steps_per_epoch": steps_per_epoch,
                    "epoch_time_s": sit * steps_per_epoch,
                    "epoch_time_projected": True,
                    "model": "tiny",
                }
            )
    return rows


def test_l1_claims_follow_the_numbers(llm_sandbox):
    fake_runs("L1", l1_rows(1.2))
    fig_datasets.build(PROFILE)
    v = verdicts("fig-datasets")
    assert v == {"L1a": c.HOLDS, "L1b": c.UNMEASURED, "L1c": c.HOLDS, "L1d": c.HOLDS}
    table = c.pd.read_csv(store.tables_dir(PROFILE) / "fig-datasets.csv")
    assert len(table) == 8
    meta = meta_of("fig-datasets")
    assert any("gloo ranks" in n for n in meta["notes"])
    assert any("projected" in n for n in meta["notes"])

    fake_runs("L1", l1_rows(2.5, swap=True))  # s/it more than doubles; grammar slow
    fig_datasets.build(PROFILE)
    v = verdicts("fig-datasets")
    assert v["L1a"] == c.FAILS and v["L1c"] == c.FAILS
    assert v["L1d"] == c.FAILS  # 2.5x s/it on half the steps: the epoch takes longer


def test_l1b_is_judged_with_more_than_two_gpu_counts(llm_sandbox):
    rows = l1_rows(1.2, gpus=(1, 2, 4))
    for r in rows:  # 4 GPUs: same s/it as 2 GPUs
        if r["gpus"] == 4:
            r["s_per_it"] = L1_SIT[r["dataset"]] * 1.2 * 1.05
    fake_runs("L1", rows)
    fig_datasets.build(PROFILE)
    assert verdicts("fig-datasets")["L1b"] == c.HOLDS
    rows[-1]["s_per_it"] *= 1.5
    fake_runs("L1", rows)
    fig_datasets.build(PROFILE)
    assert verdicts("fig-datasets")["L1b"] == c.FAILS


# ---------------------------------------------------------------- L2
def l2_rows(device: str, gain_pct: float) -> list[dict]:
    rows = []
    for g, t in ((1, 100.0), (2, 60.0)):
        for pin in (False, True):
            tt = t * (1 - gain_pct / 100) if pin else t
            rows.append(
                {
                    "dataset": "alpaca",
                    "gpus": g,
                    "pin_memory": pin,
                    "max_steps": 8,
                    "s_per_it": tt / 100,
                    "epoch_time_s": tt,
                    "epoch_time_projected": True,
                    "steps": 8,
                    "device": device,
                }
            )
    return rows


@pytest.mark.parametrize(
    "device,gain,verdict",
    [("cuda", 1.0, c.HOLDS), ("cuda", 10.0, c.FAILS), ("cpu", 1.0, c.UNMEASURED)],
)
def test_l2_pin_memory_claim(llm_sandbox, device, gain, verdict):
    fake_runs("L2", l2_rows(device, gain))
    table_llm_pinmem.build(PROFILE)
    assert verdicts("table-llm-pinmem") == {"L2a": verdict}
    meta = meta_of("table-llm-pinmem")
    assert meta["paper_csv"] == "table5_pin_memory_llm.csv" and meta["figure"] is False
    t = c.pd.read_csv(store.tables_dir(PROFILE) / "table-llm-pinmem.csv")
    assert t["relative_improvement_pct"].dropna().round(3).tolist() == [gain, gain]


# ---------------------------------------------------------------- L5 / L6 / L8
SIT = {"lora": 0.3, "qlora": 0.9, "dpo": 0.6, "qat": 0.8}
SIZE = {"instruct": 1.0, "summary": 1.1, "error-correction": 0.5}
TOKENS = {"instruct": 4000, "summary": 6000, "error-correction": 2000}
MEM = {"lora": 20.0, "qlora": 8.0, "dpo": 30.0, "qat": 60.0}


def template_rows(device: str = "cpu", gpus=(1, 2), sit=None, mem=None, qat_status=None):
    sit = sit or SIT
    rows = []
    for d in c.LLM_TEMPLATES:
        for m in c.LLM_METHODS:
            for g in gpus:
                row = {"dataset": d, "method": m, "gpus": g, "max_steps": 0, "device": device}
                reason = llm_spec.unsupported_reason(row | {"model": "tiny"})
                if reason:
                    rows.append(row | {"status": "unsupported", "error": reason})
                    continue
                if m == "qat" and qat_status and qat_status.get(g, "ok") != "ok":
                    rows.append(row | {"status": qat_status[g], "error": "CUDA out of memory"})
                    continue
                s = sit[m] * SIZE[d]
                steps = 16 // (2 * g)
                per_gpu = (mem or MEM)[m] * (SIZE[d] if d == "error-correction" else 1)
                if m == "dpo" and g == 2:
                    per_gpu *= 2
                elif m == "dpo" and g > 2:
                    per_gpu = per_gpu * 2 * 2 / g
                rows.append(
                    row
                    | {
                        "s_per_it": s,
                        "epoch_time_s": s * steps,
                        "epoch_time_projected": False,
                        "steps": steps,
                        "steps_per_epoch": steps,
                        "dataset_rows": 16,
                        "dataset_tokens": TOKENS[d] * (2 if m == "dpo" else 1),
                        "peak_memory_bytes": int(per_gpu * GIB),
                        "memory_kind": "host_peak_rss" if device == "cpu" else "gpu_active",
                        "model": "tiny",
                    }
                )
    return rows


def test_l5_claims_and_token_counts(llm_sandbox):
    fake_runs("L5", template_rows())
    fig_templates.build(PROFILE)
    assert verdicts("fig-templates") == {
        "L5a": c.HOLDS,
        "L5b": c.HOLDS,
        "L5c": c.HOLDS,
        "L5d": c.HOLDS,
    }
    meta = meta_of("fig-templates")
    assert meta["paper_csv"] == "template_subsets.csv"
    note = next(n for n in meta["notes"] if n.startswith("Template subsets"))
    assert "Instruct 4,000 tokens in 16 rows (paper: 59,330 in 500)" in note
    assert "Error Correction 2,000 tokens" in note  # LoRA's count, not DPO's pair count
    t = c.pd.read_csv(store.tables_dir(PROFILE) / "fig-templates.csv")
    assert len(t) == 24 and (t["status"] == "unsupported").sum() == 6
    assert t[t["status"] == "unsupported"]["reason"].notna().all()

    slow = {**SIT, "qat": 0.5, "lora": 0.7}  # QAT faster than DPO, LoRA not the fastest
    fake_runs("L5", template_rows(sit=slow))
    fig_templates.build(PROFILE)
    v = verdicts("fig-templates")
    assert v["L5a"] == c.FAILS and v["L5c"] == c.FAILS and v["L5b"] == c.FAILS


def test_l5d_needs_error_correction_fastest(llm_sandbox):
    SIZE["error-correction"] = 1.2
    try:
        fake_runs("L5", template_rows())
        fig_templates.build(PROFILE)
    finally:
        SIZE["error-correction"] = 0.5
    assert verdicts("fig-templates")["L5d"] == c.FAILS


def test_l6_scaling_and_lora_vs_dpo(llm_sandbox):
    rows = [r for r in template_rows() if r["method"] in ("lora", "dpo")]
    fake_runs("L6", rows)  # 2 ranks: same s/it, half the steps; LoRA 50 % below DPO
    fig_template_scaling.build(PROFILE)
    assert verdicts("fig-template-scaling") == {"L6a": c.HOLDS, "L6b": c.HOLDS}
    fake_runs(
        "L6",
        [r for r in template_rows(sit={**SIT, "lora": 0.45}) if r["method"] in ("lora", "dpo")],
    )
    fig_template_scaling.build(PROFILE)
    assert verdicts("fig-template-scaling")["L6b"] == c.HOLDS  # 25 %: inside 20-50 %
    fake_runs(
        "L6",
        [r for r in template_rows(sit={**SIT, "lora": 0.55}) if r["method"] in ("lora", "dpo")],
    )
    fig_template_scaling.build(PROFILE)
    assert verdicts("fig-template-scaling")["L6b"] == c.FAILS  # 8 %
    slow = [r for r in template_rows() if r["method"] in ("lora", "dpo")]
    for r in slow:
        if r["gpus"] == 2:
            r["epoch_time_s"] *= 3
    fake_runs("L6", slow)
    fig_template_scaling.build(PROFILE)
    assert verdicts("fig-template-scaling")["L6a"] == c.FAILS


def test_l8_on_cpu_is_host_memory_and_not_judged(llm_sandbox):
    fake_runs("L8", template_rows(), skipped=[{"run": "x-4gpu", "gpus": 4, "reason": "r"}])
    fig_vram.build(PROFILE)
    assert set(verdicts("fig-vram").values()) == {c.UNMEASURED}
    meta = meta_of("fig-vram")
    assert meta["skipped"] and any("not VRAM" in n for n in meta["notes"])
    assert all("not VRAM" in cl["evidence"] or "no GPU" in cl["evidence"] for cl in meta["claims"])
    t = c.pd.read_csv(store.tables_dir(PROFILE) / "fig-vram.csv")
    assert len(t) == 24 and set(t["status"]) == {"ok", "unsupported"}
    assert (t["memory_kind"].dropna() == "host_peak_rss").all()


def test_l8_claims_on_gpu(llm_sandbox):
    rows = template_rows("cuda", gpus=(1, 2, 4), qat_status={2: "oom"})
    for r in rows:  # LoRA: 10 % lower at 2 GPUs, flat after
        if r["method"] == "lora" and r["gpus"] > 1 and r.get("status", "ok") == "ok":
            r["peak_memory_bytes"] = int(r["peak_memory_bytes"] * 0.9)
    fake_runs("L8", rows)
    fig_vram.build(PROFILE)
    assert verdicts("fig-vram") == {
        "L8a": c.HOLDS,
        "L8b": c.HOLDS,
        "L8c": c.HOLDS,
        "L8d": c.HOLDS,
        "L8e": c.HOLDS,
    }
    t = c.pd.read_csv(store.tables_dir(PROFILE) / "fig-vram.csv")
    assert (t["status"] == "oom").sum() == 3

    rows = template_rows("cuda", gpus=(1, 2, 4), mem={**MEM, "qlora": 25.0})  # QAT fits on 2
    fake_runs("L8", rows)
    fig_vram.build(PROFILE)
    v = verdicts("fig-vram")
    assert v["L8c"] == c.FAILS and v["L8d"] == c.FAILS and v["L8b"] == c.FAILS


def test_figures_are_drawn_from_the_tables(llm_sandbox, monkeypatch, tmp_path):
    from report.figures import common as fc
    from report.figures import fig_datasets as f1
    from report.figures import fig_template_scaling as f6
    from report.figures import fig_templates as f5
    from report.figures import fig_vram as f8

    monkeypatch.setattr(fc, "OUT_DIR", tmp_path)
    fake_runs("L1", l1_rows(1.2))
    fake_runs("L5", template_rows())
    fake_runs("L6", [r for r in template_rows() if r["method"] in ("lora", "dpo")])
    fake_runs("L8", template_rows())
    for build, mod in (
        (fig_datasets.build, f1),
        (fig_templates.build, f5),
        (fig_template_scaling.build, f6),
        (fig_vram.build, f8),
    ):
        build(PROFILE)
        df, meta = fc.load(mod.TARGET, PROFILE)
        png = fc.save(mod.draw(df, meta), mod.TARGET, PROFILE)
        assert png.is_file() and png.stat().st_size > 10_000


def test_missing_sweep_says_what_to_run(llm_sandbox):
    with pytest.raises(c.AnalysisError, match="make fig-vram"):
        fig_vram.build(PROFILE)
