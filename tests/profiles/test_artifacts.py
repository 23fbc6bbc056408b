"""The profiler artifacts' tables and claims on GPU-like metrics and on CPU-only ones."""

from __future__ import annotations

import pandas as pd

from analysis import fig_api_share, fig_llm_api, fig_transfers, fig_vision_metrics
from analysis import table_precision_profile as v6
from analysis.common import FAILS, HOLDS, UNMEASURED
from analysis.profiles import artifact as pa
from analysis.profiles.metrics import COLUMNS


def tidy(rows: list[tuple]) -> pd.DataFrame:
    """rows: (run, rank, metric, total_s, share, bytes) -> the metrics table."""
    recs = [
        {"run": r, "rank": k, "source": "nsys", "metric": m, "raw_name": m, "calls": 10,
         "total_s": s, "bytes": b, "share": sh}
        for r, k, m, s, sh, b in rows
    ]  # fmt: skip
    return pd.DataFrame(recs, columns=COLUMNS).astype({"bytes": "Int64"})


def runs(cells: list[dict]) -> pd.DataFrame:
    return pd.DataFrame([{**c, "status": "ok", "device": "H100"} for c in cells])


def verdicts(claims: list[dict]) -> dict[str, str]:
    return {c["id"]: c["verdict"] for c in claims}


def v5_case(pin_cuts_htod: bool = True) -> tuple[pd.DataFrame, pd.DataFrame]:
    cells, rows = [], []
    for size in (100, 500):
        for g in (2, 4):
            for pin in (False, True):
                run = f"r{size}-{g}-{pin}"
                cells.append({"run": run, "image_size": size, "gpus": g, "pin_memory": pin})
                htod = (3.4 if size == 100 else 90.0) * (0.2 if pin == pin_cuts_htod else 1.0)
                sync = 18.0 if pin else 1.3
                nccl = {2: 7.0, 4: 39.0}[g] * (63 / 39 if pin and g == 4 else 1)
                launch_share = 0.3 if size == 100 else 0.05
                for rank in range(g):  # every rank reports; totals are summed over ranks
                    rows += [
                        (run, rank, "memcpy_htod", htod / g, 0.01, 1000),
                        (run, rank, "cudaStreamSynchronize", sync / g, 0.01, None),
                        (run, rank, "cudaLaunchKernel", 1.0, launch_share, None),
                        (run, rank, "nccl_allgather_ring_ll", nccl / g, 0.02, None),
                    ]
    return runs(cells), tidy(rows)


def test_v5_claims_hold_on_paper_like_numbers() -> None:
    t = fig_vision_metrics.build_table(*v5_case())
    assert verdicts(fig_vision_metrics.claims(t)) == {"V5a": HOLDS, "V5b": HOLDS, "V5c": HOLDS}
    row = t[(t["run"] == "r500-4-False") & (t["metric"] == "memcpy_htod")].iloc[0]
    assert row["total_s"] == 90.0 and row["ranks"] == 4 and row["bytes"] == 4000
    assert abs(row["share_pct"] - 1.0) < 1e-9  # mean over ranks, in percent


def test_v5b_fails_when_pin_raises_htod() -> None:
    t = fig_vision_metrics.build_table(*v5_case(pin_cuts_htod=False))
    assert verdicts(fig_vision_metrics.claims(t))["V5b"] == FAILS


def test_cpu_profile_says_not_measured_never_zero() -> None:
    r = runs([{"run": "cpu", "image_size": 32, "gpus": 2, "pin_memory": False}])
    r["device"] = "cpu"
    rows = [("cpu", k, "cpu:gloo:all_reduce", 0.5, 0.1, None) for k in (0, 1)]
    rows += [
        (
            "cpu",
            0,
            "cpu:enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
            0.2,
            0.05,
            None,
        )
    ]
    t = fig_vision_metrics.build_table(r, tidy(rows))
    paper = t[t["kind"] == pa.PAPER]
    assert set(paper["note"]) == {pa.NOT_MEASURED} and paper["total_s"].isna().all()
    cpu = t[t["kind"] == pa.CPU].set_index("metric")
    assert cpu.loc["cpu:gloo:all_reduce", "total_s"] == 1.0
    assert cpu.loc["cpu:gloo:all_reduce", "label"].startswith("gloo allreduce (NCCL allreduce")
    assert set(verdicts(fig_vision_metrics.claims(t)).values()) == {UNMEASURED}
    assert any("not measured on this hardware" in n for n in pa.notes(t, r))


def test_failed_run_is_a_row_not_a_number() -> None:
    r = runs([{"run": "x", "image_size": 32, "gpus": 1, "pin_memory": False}])
    r["status"], r["error"] = "failed", "profile: rank0.pt.trace.json.gz: truncated JSON"
    t = fig_vision_metrics.build_table(r, tidy([]))
    assert len(t) == 1 and "truncated JSON" in t["note"].iloc[0]


def test_v6_falls_and_paper_quotes_beside() -> None:
    cells = [{"run": p, "precision": p, "gpus": 4} for p in ("fp64", "fp32", "fp16")]
    vals = {"fp64": (226, 1334, 205), "fp32": (104, 724, 84), "fp16": (50, 478, 16)}
    rows = []
    for p, (h, m, e) in vals.items():
        rows += [(p, 0, "memcpy_htod", h, 0.1, 1), (p, 0, "cudaMemcpyAsync", m, 0.1, None),
                 (p, 0, "cudaEventDestroy", e, 0.1, None)]  # fmt: skip
    t = v6.build_table(runs(cells), tidy(rows))
    assert verdicts(v6.claims(t)) == {"V6a": HOLDS, "V6b": HOLDS, "V6c": HOLDS}
    q = t[(t["metric"] == "memcpy_htod") & (t["precision"] == "fp64")].iloc[0]
    assert q["paper_s"] == 226 and q["total_s"] == 226
    # the broadcast kernel was not in this profile: a row saying so, with the paper's 40 s beside
    b = t[(t["metric"] == "nccl_broadcast") & (t["precision"] == "fp64")].iloc[0]
    assert b["note"] == pa.NOT_MEASURED and b["paper_s"] == 40


def llm_case(htod_share: float = 0.001) -> tuple[pd.DataFrame, pd.DataFrame]:
    cells, rows = [], []
    sync = {"lora": 0.001, "dpo": 0.2, "qat": 0.3, "qlora": 0.0}
    launch = {"lora": 0.1, "dpo": 0.15, "qat": 0.3, "qlora": 0.12}
    mb = {"lora": 10e6, "dpo": 50e6, "qat": 60e6, "qlora": 5e6}
    for d, size in (("instruct", 1.0), ("summary", 1.05), ("error-correction", 0.5)):
        for m in ("lora", "dpo", "qat"):
            run = f"{m}-{d}"
            cells.append({"run": run, "dataset": d, "method": m, "gpus": 2})
            for k in (0, 1):
                rows += [
                    (run, k, "cudaLaunchKernel", 10, launch[m], None),
                    (run, k, "cudaStreamSynchronize", 10, sync[m], None),
                    (run, k, "memcpy_htod", 0.1, htod_share, int(mb[m] * size)),
                    (run, k, "memcpy_dtod", 0.1, 0.0, int(mb[m] * size)),
                ]
    return runs(cells), tidy(rows)


def test_l7_and_l9_claims() -> None:
    r, td = llm_case()
    t7 = fig_api_share.build_table(r, td)
    assert verdicts(fig_api_share.claims(t7)) == {
        "L7a": HOLDS,
        "L7b": HOLDS,
        "L7c": HOLDS,
        "L7d": HOLDS,
    }
    t9 = fig_transfers.build_table(r, td)
    assert verdicts(fig_transfers.claims(t9)) == {"L9a": HOLDS, "L9b": HOLDS}
    dtoh = t9[(t9["metric"] == "memcpy_dtoh")]
    assert set(dtoh["note"]) == {pa.NOT_MEASURED}  # no DtoH copies: absent, not zero bytes
    r, td = llm_case(htod_share=0.05)
    assert verdicts(fig_api_share.claims(fig_api_share.build_table(r, td)))["L7c"] == FAILS


def test_l3_needs_the_iteration_time() -> None:
    cells, rows = [], []
    for d, sit in (("alpaca", 1.0), ("grammar", 0.5), ("samsum", 0.6), ("slimorca", 1.1)):
        cells.append({"run": d, "dataset": d, "s_per_it": sit})
        rows += [(d, 0, "cudaLaunchKernel", 100 * sit, 0.3, None),
                 (d, 0, "cudaStreamSynchronize", 50, 0.1, None),
                 (d, 0, "memcpy_htod", 0.1, 0.0001, 10)]  # fmt: skip
    t = fig_llm_api.build_table(runs(cells), tidy(rows))
    assert verdicts(fig_llm_api.claims(t)) == {
        "L3a": HOLDS,
        "L3b": HOLDS,
        "L3c": HOLDS,
        "L3d": HOLDS,
    }
