"""The profiler artifacts' tables and claims on GPU-like metrics and on CPU-only ones:
kernel launches over all APIs beside cudaLaunchKernel, and what an absent metric means."""

from __future__ import annotations

import matplotlib
import pandas as pd
import pytest

from analysis.artifacts import (
    fig_api_share,
    fig_llm_api,
    fig_llm_api_pinmem,
    fig_transfers,
    fig_vision_metrics,
)
from analysis.artifacts import table_precision_profile as v6
from analysis.claims import spec as cs
from analysis.claims import verdicts as cl
from analysis.claims.verdicts import FAILS, HOLDS, UNMEASURED
from analysis.profiles import artifact as pa
from analysis.profiles import coverage as cov
from analysis.profiles.metrics import COLUMNS, KERNEL_LAUNCH_ALL, LABELS, LAUNCH_APIS

matplotlib.use("Agg")


def tidy(rows: list[tuple], source: str = "nsys", calls: int = 10) -> pd.DataFrame:
    """rows: (run, rank, metric, total_s, share, bytes) -> the metrics table."""
    recs = [
        {"run": r, "rank": k, "source": source, "metric": m, "raw_name": m, "calls": calls,
         "total_s": s, "bytes": b, "share": sh}
        for r, k, m, s, sh, b in rows
    ]  # fmt: skip
    return pd.DataFrame(recs, columns=COLUMNS).astype({"bytes": "Int64"})


def runs(cells: list[dict], device: str = "H100") -> pd.DataFrame:
    return pd.DataFrame([{"status": "ok", "device": device, **c} for c in cells])


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
    r, td = v5_case()
    t = fig_vision_metrics.build_table(r, td)
    assert verdicts(v5_claims(r, t)) == {"V5a": HOLDS, "V5b": HOLDS, "V5c": HOLDS}
    row = t[(t["run"] == "r500-4-False") & (t["metric"] == "memcpy_htod")].iloc[0]
    assert row["total_s"] == 90.0 and row["ranks"] == 4 and row["bytes"] == 4000
    assert abs(row["share_pct"] - 1.0) < 1e-9  # mean over ranks, in percent


def test_v5b_fails_when_pin_raises_htod() -> None:
    r, td = v5_case(pin_cuts_htod=False)
    t = fig_vision_metrics.build_table(r, td)
    assert verdicts(v5_claims(r, t))["V5b"] == FAILS


def test_v5_compact_and_the_paper_s_quotes() -> None:
    r, td = v5_case()
    comp = fig_vision_metrics.compact(fig_vision_metrics.build_table(r, td))
    assert list(comp.columns[:3]) == fig_vision_metrics.KEYS and len(comp) == 8
    row = comp[(comp["image_size"] == 500) & (comp["gpus"] == 4) & comp["pin_memory"]].iloc[0]
    assert row["HtoD [s]"] == pytest.approx(18.0) and row["NCCL kernels [s]"] == pytest.approx(63)
    assert row["launch + NCCL [%]"] == pytest.approx(100 * (0.05 + 0.02))
    p = fig_vision_metrics.paper()
    assert list(p.columns) == list(fig_vision_metrics.build_table(r, td).columns)
    htod = p[(p["metric"] == "memcpy_htod") & (p["image_size"] == 500) & ~p["pin_memory"]]
    assert sorted(htod["total_s"]) == [85.0, 101.0] and htod["gpus"].isna().all()
    nccl = p[p["label"] == fig_vision_metrics.NCCL_TOTAL_LABEL]
    assert set(zip(nccl["gpus"], nccl["pin_memory"], nccl["total_s"], strict=True)) == {
        (2.0, False, 7.0), (4.0, False, 39.0), (4.0, True, 63.0)}  # fmt: skip
    pc = fig_vision_metrics.compact(p)  # a quoted range: its midpoint, with the range beside
    r500 = pc[(pc["image_size"] == 500) & pc["gpus"].isna() & ~pc["pin_memory"]].iloc[0]
    assert (r500["HtoD [s]"], r500["HtoD [s]_min"], r500["HtoD [s]_max"]) == (93.0, 85.0, 101.0)
    paper = {c["id"]: c["verdict"] for c in _judged("V5", p)}
    assert paper == {"V5a": UNMEASURED, "V5b": HOLDS, "V5c": HOLDS}  # no shares were quoted


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
    claims = v5_claims(r, t)
    assert set(verdicts(claims).values()) == {UNMEASURED}
    gate = fig_vision_metrics.ARTIFACT.gates(r, t)["gpu"]
    assert gate.startswith(f"{pa.NOT_MEASURED} (no CUDA in the profile)")
    # the failing gate says why (no GPU), not the bare "not measured" of the empty rows
    assert all(c["reason"] == gate for c in claims)
    assert any("not measured on this hardware" in n for n in pa.notes(r, t))
    # the all-API launch count beside cudaLaunchKernel: not measured either, never 0
    extra = t[t["kind"] == pa.EXTRA]
    assert list(extra["metric"]) == [KERNEL_LAUNCH_ALL] and list(extra["note"]) == [pa.NOT_MEASURED]
    assert extra["calls"].isna().all() and not extra["measured"].any()


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
    assert verdicts(v6_claims(runs(cells), t)) == {"V6a": HOLDS, "V6b": HOLDS, "V6c": HOLDS}
    q = t[(t["metric"] == "memcpy_htod") & (t["precision"] == "fp64")].iloc[0]
    assert q["paper_s"] == 226 and q["total_s"] == 226
    # no broadcast kernel in this GPU profile: the run did not call one, 0 with the paper's 40 s
    b = t[(t["metric"] == "nccl_broadcast") & (t["precision"] == "fp64")].iloc[0]
    assert b["note"] == pa.NOT_CALLED and b["measured"] and b["paper_s"] == 40
    assert (b["calls"], b["total_s"], b["share_pct"]) == (0, 0.0, 0.0) and pd.isna(b["bytes"])


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
    assert verdicts(l7_claims(t7)) == {
        "L7a": HOLDS,
        "L7b": HOLDS,
        "L7c": HOLDS,
        "L7d": HOLDS,
    }
    t9 = fig_transfers.build_table(r, td)
    assert verdicts(l9_claims(t9)) == {"L9a": HOLDS, "L9b": HOLDS}
    dtoh = t9[(t9["metric"] == "memcpy_dtoh")]
    # no DtoH copy in these GPU profiles: the runs made none, 0 bytes (not "not measured")
    assert set(dtoh["note"]) == {pa.NOT_CALLED} and dtoh["measured"].all()
    assert (dtoh["bytes"] == 0).all() and (dtoh["calls"] == 0).all()
    r, td = llm_case(htod_share=0.05)
    assert verdicts(l7_claims(fig_api_share.build_table(r, td)))["L7c"] == FAILS


def test_l3_needs_the_iteration_time() -> None:
    cells, rows = [], []
    for d, sit in (("alpaca", 1.0), ("grammar", 0.5), ("samsum", 0.6), ("slimorca", 1.1)):
        cells.append({"run": d, "dataset": d, "s_per_it": sit})
        rows += [(d, 0, "cudaLaunchKernel", 100 * sit, 0.3, None),
                 (d, 0, "cudaStreamSynchronize", 50, 0.1, None),
                 (d, 0, "memcpy_htod", 0.1, 0.0001, 10)]  # fmt: skip
    t = fig_llm_api.build_table(runs(cells), tidy(rows))
    assert verdicts(_with_gates(fig_llm_api, "L3", runs(cells), t)) == {
        "L3a": HOLDS,
        "L3b": HOLDS,
        "L3c": HOLDS,
        "L3d": HOLDS,
    }
    no_sit = fig_llm_api.build_table(runs(cells).drop(columns="s_per_it"), tidy(rows))
    assert verdicts(_with_gates(fig_llm_api, "L3", runs(cells), no_sit))["L3b"] == UNMEASURED


# --- kernel launches through every API (issue 9, item 18) ---------------------------------


def with_other_launches(r: pd.DataFrame, td: pd.DataFrame, calls: int = 30) -> pd.DataFrame:
    """td plus, on every rank of every run, cudaLaunchKernelExC and cuLaunchKernel calls."""
    ranks = td[["run", "rank"]].drop_duplicates().itertuples(index=False)
    other = (("cudaLaunchKernelExC", 5.0, 0.2), ("cuLaunchKernel", 1.0, 0.05))
    rows = [(run, k, m, t, sh, None) for run, k in ranks for m, t, sh in other]
    return pd.concat([td, tidy(rows, calls=calls)], ignore_index=True)


def test_launch_all_beside_cudalaunchkernel_and_out_of_the_claims() -> None:
    r, td = llm_case()
    t0 = fig_api_share.build_table(r, td)
    t = fig_api_share.build_table(r, with_other_launches(r, td))
    # claims are judged on the paper's cudaLaunchKernel: the extra launches change no verdict
    # and no evidence (the L7 sums never include kernel_launch_all or its parts)
    assert l7_claims(t) == l7_claims(t0)
    for run, rows in t.groupby("run", sort=False):
        order = list(rows["metric"])
        assert order[order.index("cudaLaunchKernel") + 1] == KERNEL_LAUNCH_ALL, run
    row = t[(t["run"] == "qat-summary") & (t["metric"] == KERNEL_LAUNCH_ALL)].iloc[0]
    assert row["kind"] == pa.EXTRA and row["label"] == LABELS[KERNEL_LAUNCH_ALL]
    assert row["measured"] and row["note"] == ""
    assert row["calls"] == 2 * (10 + 30 + 30)  # two ranks: cudaLaunchKernel + ExC + cuLaunch
    assert row["total_s"] == pytest.approx(2 * (10 + 5 + 1))
    assert row["share_pct"] == pytest.approx(100 * (0.3 + 0.2 + 0.05))  # mean over ranks
    launch = t[(t["run"] == "qat-summary") & (t["metric"] == "cudaLaunchKernel")].iloc[0]
    assert launch["calls"] == 20 and launch["kind"] == pa.PAPER  # the paper's metric unchanged
    # never a claim input: no paper row
    assert not ((t["kind"] == pa.PAPER) & (t["metric"] == KERNEL_LAUNCH_ALL)).any()
    notes = pa.notes(r, t)
    assert any(n.startswith(f"{KERNEL_LAUNCH_ALL} (") for n in notes)
    assert any("in 9 of 9 runs" in n.lower() and "(up to 7x)" in n for n in notes)  # 140 vs 20
    assert not any("more than 1.5x" in n for n in pa.notes(r, t0))  # equal counts: no such note


def test_launch_all_in_every_artifact_that_shows_cudalaunchkernel() -> None:
    r5, td5 = v5_case()
    t5 = fig_vision_metrics.build_table(r5, with_other_launches(r5, td5))
    r7, td7 = llm_case()
    t7 = fig_api_share.build_table(r7, with_other_launches(r7, td7))
    cells = [{"run": f"{g}-{p}", "gpus": g, "pin_memory": p, "s_per_it": 1.0}
             for g in (1, 2) for p in (False, True)]  # fmt: skip
    rows = [(c["run"], 0, "cudaLaunchKernel", 10, 0.1, None) for c in cells]
    r4 = runs(cells, "cuda")
    t4 = fig_llm_api_pinmem.build_table(r4, with_other_launches(r4, tidy(rows)))
    r3 = runs([{"run": d, "dataset": d, "s_per_it": 1.0} for d in fig_llm_api.DATASETS], "cuda")
    rows3 = [(d, 0, "cudaLaunchKernel", 10, 0.1, None) for d in fig_llm_api.DATASETS]
    t3 = fig_llm_api.build_table(r3, with_other_launches(r3, tidy(rows3)))
    for t in (t5, t7, t4, t3):
        per_run = t[t["metric"].isin(["cudaLaunchKernel", KERNEL_LAUNCH_ALL])]
        assert len(per_run) == 2 * t["run"].nunique()
        for _, rows_ in t.groupby("run", sort=False):
            order = list(rows_["metric"])
            assert order[order.index("cudaLaunchKernel") + 1] == KERNEL_LAUNCH_ALL
        extra = t[t["metric"] == KERNEL_LAUNCH_ALL]
        paper = t[t["metric"] == "cudaLaunchKernel"].set_index("run")["calls"]
        # per run: its cudaLaunchKernel calls plus 30 ExC and 30 cuLaunchKernel calls per rank
        ranks = t.drop_duplicates("run").set_index("run")["ranks"]
        for _, e in extra.iterrows():
            assert e["calls"] == paper[e["run"]] + 60 * ranks[e["run"]]


# --- what an absent metric means (issue 9, item 19) ---------------------------------------


def v6_rows(with_event_destroy: bool = False) -> list[tuple]:
    vals = {"fp64": (226, 1334, 205), "fp32": (104, 724, 84), "fp16": (50, 478, 16)}
    rows = []
    for p, (h, m, e) in vals.items():
        rows += [(p, 0, "memcpy_htod", h, 0.1, 1), (p, 0, "cudaMemcpyAsync", m, 0.1, None)]
        if with_event_destroy:
            rows.append((p, 0, "cudaEventDestroy", e, 0.1, None))
    return rows


V6_CELLS = [{"run": p, "precision": p, "gpus": 1} for p in ("fp64", "fp32", "fp16")]


@pytest.mark.parametrize("device", ["cuda", "NVIDIA H100 80GB HBM3"])  # LLM / vision summaries
def test_gpu_torch_profile_cannot_record_event_destroy(device: str) -> None:
    t = v6.build_table(runs(V6_CELLS, device), tidy(v6_rows(), source="torch"))
    ed = t[t["metric"] == "cudaEventDestroy"]
    assert len(ed) == 3 and set(ed["note"]) == {"not recorded by torch.profiler"}
    assert not ed["measured"].any() and ed["total_s"].isna().all() and ed["calls"].isna().all()
    got = {c["id"]: c for c in v6_claims(runs(V6_CELLS, device), t)}
    assert verdicts(list(got.values())) == {"V6a": HOLDS, "V6b": HOLDS, "V6c": UNMEASURED}
    gates = v6.gates(runs(V6_CELLS, device), t)
    assert set(gates) == {"gpu", "records_cuda_event_destroy"} and not gates["gpu"]
    why = gates["records_cuda_event_destroy"]
    assert got["V6c"]["reason"] == why  # the profiler is the reason, not the GPU
    assert why.startswith("cudaEventDestroy: not recorded by torch.profiler (")
    assert "PROFILER=nsys" in why and cov.NOT_MEASURED not in why
    # one GPU: no broadcast kernel called, a real 0 beside the paper's 40 s
    b = t[(t["metric"] == "nccl_broadcast") & (t["precision"] == "fp64")].iloc[0]
    assert b["measured"] and b["total_s"] == 0 and b["note"] == cov.NOT_CALLED
    notes = pa.notes(runs(V6_CELLS, device), t)
    assert any(n.startswith("cudaEventDestroy: not recorded by torch.profiler") for n in notes)
    assert any(n.startswith("nccl_broadcast: 0 in some GPU runs") for n in notes)


def test_event_destroy_recorded_by_torch_or_absent_under_nsys() -> None:
    # a torch trace that does hold it (older Kineto) is measured as it is
    t = v6.build_table(runs(V6_CELLS), tidy(v6_rows(True), source="torch"))
    assert verdicts(v6_claims(runs(V6_CELLS), t))["V6c"] == HOLDS
    assert not v6.gates(runs(V6_CELLS), t).get("records_cuda_event_destroy")
    # nsys records every runtime call: absent from a GPU profile means never called, 0
    t = v6.build_table(runs(V6_CELLS), tidy(v6_rows(), source="nsys"))
    ed = t[t["metric"] == "cudaEventDestroy"]
    assert set(ed["note"]) == {cov.NOT_CALLED} and ed["measured"].all()
    assert (ed["total_s"] == 0).all() and (ed["calls"] == 0).all()
    assert verdicts(v6_claims(runs(V6_CELLS), t))["V6c"] == FAILS  # 0 s does not fall 2x


def test_cpu_run_with_torch_profile_is_not_measured_not_unrecorded() -> None:
    """On a CPU the missing GPU is the reason for every CUDA metric, cudaEventDestroy too."""
    rows = [(p, 0, "cpu:aten::copy_", 1.0, 0.1, None) for p in ("fp64", "fp32", "fp16")]
    t = v6.build_table(runs(V6_CELLS, "cpu"), tidy(rows, source="torch"))
    paper = t[t["kind"] == pa.PAPER]
    assert set(paper["note"]) == {cov.NOT_MEASURED} and paper["total_s"].isna().all()
    v6c = {c["id"]: c for c in v6_claims(runs(V6_CELLS, "cpu"), t)}["V6c"]
    gates = v6.gates(runs(V6_CELLS, "cpu"), t)  # the missing GPU is the reason, not the profiler
    assert "no CUDA in the profile" in gates["gpu"] and "records_cuda_event_destroy" not in gates
    assert v6c["verdict"] == UNMEASURED and v6c["reason"] == gates["gpu"]


def test_gpu_run_without_nccl_is_zero_and_cpu_run_is_not_measured() -> None:
    cells = [{"run": f"1-{p}", "gpus": 1, "pin_memory": p, "s_per_it": 1.0} for p in (0, 1)]
    rows = [(c["run"], 0, m, 2.0, 0.2, b) for c in cells
            for m, b in (("cudaLaunchKernel", None), ("memcpy_htod", 4096))]  # fmt: skip
    t = fig_llm_api_pinmem.build_table(runs(cells, "cuda"), tidy(rows, source="torch"))
    nccl = t[t["metric"].isin(fig_llm_api_pinmem.NCCL)]
    assert len(nccl) == 4 and nccl["measured"].all() and set(nccl["note"]) == {cov.NOT_CALLED}
    assert (nccl["calls"] == 0).all() and (nccl["total_s"] == 0).all()
    assert (nccl["share_pct"] == 0).all() and nccl["bytes"].isna().all()  # not a copy: no bytes
    # memcpy metrics the GPU run did not call: 0 bytes as well
    t9 = fig_transfers.build_table(
        runs([{"run": "x", "dataset": "summary", "method": "lora", "gpus": 1}], "cuda"),
        tidy([("x", 0, "memcpy_htod", 1.0, 0.1, 100)], source="torch"),
    )
    dtod = t9[t9["metric"] == "memcpy_dtod"].iloc[0]
    assert dtod["measured"] and dtod["bytes"] == 0 and dtod["calls"] == 0
    # the same conditions on a CPU: the NCCL rows say not measured, never 0
    cpu_rows = [(c["run"], 0, "cpu:gloo:all_reduce", 1.0, 0.1, None) for c in cells]
    t = fig_llm_api_pinmem.build_table(runs(cells, "cpu"), tidy(cpu_rows, source="torch"))
    nccl = t[t["metric"].isin(fig_llm_api_pinmem.NCCL)]
    assert set(nccl["note"]) == {cov.NOT_MEASURED} and nccl["calls"].isna().all()


def test_gpu_profile_without_any_cuda_row_is_no_zero() -> None:
    """A GPU run whose profile saw no CUDA at all: a 0 would be a guess, so no number."""
    cells = [{"run": "g", "gpus": 1, "pin_memory": False, "s_per_it": 1.0}]
    t = fig_llm_api_pinmem.build_table(
        runs(cells, "cuda"), tidy([("g", 0, "cpu:aten::mm", 1.0, 0.5, None)], source="torch")
    )
    paper = t[t["kind"].isin([pa.PAPER, pa.EXTRA])]
    assert set(paper["note"]) == {cov.NO_CUDA_IN_PROFILE} and not paper["measured"].any()


def test_unknown_device_is_read_from_the_profile() -> None:
    """Older summaries without `device`: CUDA rows in the profile mean a GPU run."""
    cells = [{"run": "g", "gpus": 1, "pin_memory": False, "s_per_it": 1.0}]
    gpu = tidy([("g", 0, "cudaLaunchKernel", 1.0, 0.1, None)])
    t = fig_llm_api_pinmem.build_table(runs(cells).drop(columns="device"), gpu)
    assert set(t.loc[t["metric"] == "nccl_other", "note"]) == {cov.NOT_CALLED}
    cpu = tidy([("g", 0, "cpu:aten::mm", 1.0, 0.1, None)])
    t = fig_llm_api_pinmem.build_table(runs(cells).drop(columns="device"), cpu)
    assert set(t.loc[t["metric"] == "nccl_other", "note"]) == {cov.NOT_MEASURED}


def test_unrecordable_constants() -> None:
    assert cov.unrecordable(["torch"]) == {"cudaEventDestroy"}
    assert cov.unrecordable(["nsys"]) == frozenset()
    assert cov.unrecordable(["nsys", "torch"]) == frozenset()  # nsys records what torch cannot
    assert cov.not_recorded("torch") == "not recorded by torch.profiler"
    assert not cov.unrecordable(["torch"]) & set(LAUNCH_APIS)  # Kineto records every launch API
    assert [cov.is_cpu_device(d) for d in ("cpu", "cuda", "NVIDIA H100", None, "")] == [
        True, False, False, None, None,
    ]  # fmt: skip


def test_profile_figure_draws_launch_all_and_names_what_was_not_recorded() -> None:
    from analysis.draw_profile import metrics_figure

    r, td = llm_case()
    td = with_other_launches(r, td)
    td["source"] = "torch"
    t = fig_api_share.build_table(r, td)
    fig = metrics_figure(t, {}, ["method", "dataset"], "t", "s")
    legend = [x.get_text() for x in fig.axes[1].get_legend().get_texts()]
    assert legend[0] == "cudaLaunchKernel" and legend[1].startswith("kernel launches, all APIs")
    assert "\n" in legend[1]  # long label wrapped
    texts = [x.get_text() for x in fig.texts]
    assert not any("not recorded" in x for x in texts)  # L7 does not show cudaEventDestroy
    # V6-like metrics on a GPU torch run: the figure names the unrecorded metric and why
    t6 = v6.build_table(runs(V6_CELLS, "cuda"), tidy(v6_rows(), source="torch"))
    fig = metrics_figure(t6, {}, ["precision"], "t", "s")
    assert any(
        "cudaEventDestroy: not recorded by torch.profiler" in x.get_text() for x in fig.texts
    )
    import matplotlib.pyplot as plt

    plt.close("all")


def _judged(exp: str, t: pd.DataFrame) -> list[dict]:
    return [cl.judge(c, t) for c in cs.load() if c["experiment"] == exp]


def _with_gates(mod, exp: str, r: pd.DataFrame, t: pd.DataFrame) -> list[dict]:
    """The claims of `exp` judged as the driver judges them: with the module's gates."""
    gates = {k: v for k, v in mod.ARTIFACT.gates(r, t).items() if v}
    return [cl.judge(c, t, None, gates) for c in cs.load() if c["experiment"] == exp]


def v5_claims(r: pd.DataFrame, t: pd.DataFrame) -> list[dict]:
    return _with_gates(fig_vision_metrics, "V5", r, t)


def v6_claims(r: pd.DataFrame, t: pd.DataFrame) -> list[dict]:
    return _with_gates(v6, "V6", r, t)


def l7_claims(t: pd.DataFrame) -> list[dict]:
    return _judged("L7", t)


def l9_claims(t: pd.DataFrame) -> list[dict]:
    return _judged("L9", t)
