"""V8-V11 analysis: the pause finder of the timeline (golden cases) and the seven claims on
GPU-like tables of 1-4 GPUs."""

from __future__ import annotations

import pandas as pd
import pytest

from analysis.artifacts import fig_loaders, fig_nhwc, fig_numa, fig_timeline
from analysis.claims import spec as cs
from analysis.claims import verdicts as cl


def steps(spec: list[tuple[str, int, float, float]]) -> pd.DataFrame:
    return pd.DataFrame([{"phase": p, "epoch": e, "step": None, "t0": a, "t1": b}
                         for p, e, a, b in spec])  # fmt: skip


def test_pauses_are_found_and_located():
    # two epochs of 0.1 s steps; a 2 s wait for the first batch of epoch 2 and 1.5 s before the
    # second evaluation; one 0.15 s hiccup inside epoch 1 (below 5 x 0.1 s: no pause)
    tl = steps([
        ("epoch", 1, 0.0, 0.35), ("train_step", 1, 0.0, 0.1), ("train_step", 1, 0.1, 0.2),
        ("train_step", 1, 0.35, 0.45), ("eval", 1, 0.45, 0.65), ("eval_step", 1, 0.45, 0.55),
        ("epoch", 2, 0.65, 2.85), ("train_step", 2, 2.65, 2.75), ("train_step", 2, 2.75, 2.85),
        ("eval", 2, 2.85, 4.45), ("eval_step", 2, 4.35, 4.45),
    ])  # fmt: skip
    gaps, threshold = fig_timeline.gaps(tl)
    assert threshold == pytest.approx(0.5)
    got = [(r["epoch"], r["where"], round(r["length_s"], 2)) for _, r in gaps.iterrows()]
    assert got == [(2, "before epoch", 2.0), (2, "before evaluation", 1.5)]


def test_no_busy_interval_no_pause():
    gaps, threshold = fig_timeline.gaps(steps([("epoch", 1, 0.0, 1.0)]))
    assert gaps.empty and threshold != threshold  # NaN


def judge(exp: str, t: pd.DataFrame, gates: dict | None = None) -> dict[str, str]:
    return {c["id"]: cl.judge(c, t, gates=gates)["verdict"] for c in cs.for_experiments([exp])}


def runs(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame([{"status": "ok", "run": f"r{i}", "images_per_s": 1.0, **r}
                         for i, r in enumerate(rows)])  # fmt: skip


PAPER_LIKE = {"torch": [100, 60, 90, 95], "dali": [90, 50, 40, 32]}  # J Fig.6's shape


def test_v8_dataloader_slows_down_and_dali_does_not():
    t = fig_loaders.table(runs([{"loader": ld, "gpus": g + 1, "total_time_s": s}
                                for ld, ts in PAPER_LIKE.items() for g, s in enumerate(ts)]),
                          "p")  # fmt: skip
    assert judge("V8", t) == {"V8a": cl.HOLDS, "V8b": cl.HOLDS}
    flat = t.assign(total_time_s=60.0)
    assert judge("V8", flat) == {"V8a": cl.FAILS, "V8b": cl.HOLDS}
    assert list(fig_loaders.compact(t).columns) == ["loader", "1 GPU [s]", "2 GPUs [s]",
                                                    "3 GPUs [s]", "4 GPUs [s]"]  # fmt: skip


def test_v10_nhwc_close_to_dali_on_1_2_gpus_slowdown_remains():
    rows = [{"loader": ld, "channels_last": nhwc, "gpus": g + 1, "total_time_s": s * f}
            for ld, ts in PAPER_LIKE.items() for g, s in enumerate(ts)
            for nhwc, f in ((False, 1.0), (True, 0.9 if ld == "torch" else 1.0))]  # fmt: skip
    t = fig_nhwc.table(runs(rows), "p")
    assert judge("V10", t) == {"V10a": cl.HOLDS, "V10b": cl.HOLDS}
    assert list(fig_nhwc.compact(t)["setup"]) == ["DataLoader NCHW", "DataLoader NHWC",
                                                   "DALI NCHW", "DALI NHWC"]  # fmt: skip


def test_v9_pauses_before_every_start_with_dataloader_none_with_dali():
    t = pd.DataFrame([{"loader": ld, "gpus": g, "boundary_pause_share": share, "pauses": n,
                       "status": "ok", "run": f"{ld}{g}"}
                      for ld, share, n in (("torch", 1.0, 8), ("dali", 0.0, 0)) for g in (3, 4)])  # fmt: skip
    assert judge("V9", t) == {"V9a": cl.HOLDS, "V9b": cl.HOLDS}
    assert judge("V9", t.assign(pauses=1))["V9b"] == cl.FAILS


def test_v11_needs_two_numa_nodes():
    t = pd.DataFrame([{"numa": numa, "gpus": g + 1, "total_time_s": s, "bound": numa == "bind",
                       "machine_nodes": 2, "status": "ok", "run": f"{numa}{g}"}
                      for numa, ts in (("off", PAPER_LIKE["torch"]), ("bind", [100, 60, 45, 40]))
                      for g, s in enumerate(ts)])  # fmt: skip
    assert fig_numa.gates(t, t) == {"multi_numa": ""}
    assert judge("V11", t, {}) == {"V11a": cl.HOLDS}
    one = t.assign(machine_nodes=1)
    why = fig_numa.gates(one, one)["multi_numa"]
    assert why == "1 NUMA node on this machine: binding cannot change anything"
    got = cl.judge(cs.for_experiments(["V11"])[0], one, gates={"multi_numa": why})
    assert (got["verdict"], got["reason"]) == (cl.UNMEASURED, why)
