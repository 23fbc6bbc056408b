"""fig-optimized (O1-O4, beyond the paper): the waterfall table on hand-made runs, its compact
form, and each of our own claims judged by the one engine (holds, does not hold, inconclusive,
not measured with its reason)."""

from __future__ import annotations

import pandas as pd
import pytest

from analysis import driver
from analysis.artifacts import fig_optimized as fo
from analysis.claims import rules as cr
from analysis.claims import spec as cs
from analysis.claims import verdicts as cl
from run.sweep import matrix as mx

GPU = "NVIDIA H100 (fake)"
# the real ladders' labels, so the hand-made runs follow the matrix's steps and their order
O1, O2, O3 = ([label for label, _ in mx.ladder(e)] for e in ("O1", "O2", "O3"))
STORED = 28 * 28  # bytes of a stored uint8 MNIST image


def stage(i: int, n: int) -> str:
    return "faithful" if i == 0 else "optimised" if i == n - 1 else ""


def vision(exp: str, labels: list[str], gain: float, size: int = 500, acc: float = 98.0,
           device: str = GPU, gpus: tuple[int, ...] = (1, 2)) -> list[dict]:  # fmt: skip
    """A vision ladder whose every step is `gain` x faster than the one before."""
    rows = []
    for g in gpus:
        for i, label in enumerate(labels):
            faithful_bytes = 3 * size * size * 4  # fp32, 3 channels, upsampled on the host
            moved = faithful_bytes if i == 0 or exp == "O2" else STORED
            rows.append({
                "experiment": exp, "workload": "vision", "step": i, "step_label": label,
                "stage": stage(i, len(labels)), "gpus": g, "image_size": size,
                "images_per_s": 100.0 * g * gain**i, "final_test_accuracy_pct": acc,
                "htod_bytes_per_image": moved if device != "cpu" else None,
                "input_bytes_per_image": moved, "peak_memory_bytes": 2 * 1024**3,
                "memory_kind": "gpu_max_allocated" if device != "cpu" else "host_peak_rss",
                "device": device,
            })  # fmt: skip
    return rows


def llm(o3_gain: float, paged: float, device: str = GPU, gpus: tuple[int, ...] = (1,)) -> list:
    """O3's ladder (`o3_gain` per step, loss 5 % higher at the last step) and O4's pair (the
    paged 8-bit AdamW run at `paged` x AdamW's optimizer states and peak); O4's AdamW cell is
    O3's faithful run."""
    kind = "gpu_active" if device != "cpu" else "host_peak_rss"
    rows = []
    for g in gpus:
        for i, label in enumerate(O3):
            rows.append({
                "experiment": "O3", "workload": "llm", "step": i, "step_label": label,
                "stage": stage(i, len(O3)), "gpus": g, "tokens_per_s": 1000.0 * o3_gain**i,
                "tail_loss": 1.0 + 0.05 * (i == len(O3) - 1), "tokens_trained": 4000,
                "peak_memory_bytes": 10 * 1024**3, "memory_kind": kind, "device": device,
                "optimizer_state_bytes": 8_000_000,
            })  # fmt: skip
        for i, (label, peak) in enumerate((("adamw", 10.0), ("paged_adamw8bit", 10.0 * paged))):
            rows.append({**rows[-len(O3) - i], "experiment": "O4", "step": i,
                         "step_label": label, "stage": "faithful" if i == 0 else "",
                         "peak_memory_bytes": peak * 1024**3,
                         "optimizer_state_bytes": 8_000_000 * peak / 10.0,
                         "optimizer_state_8bit_share": 1.0 if i else None})  # fmt: skip
    return rows


def runs(rows: list[dict]) -> pd.DataFrame:
    df = pd.DataFrame(rows)
    n = len(df)
    defaults = {"status": "ok", "error": None, "seed": 0, "run": [f"r{i}" for i in range(n)]}
    for k, v in defaults.items():
        if k not in df:
            df[k] = v
    return df


def gpu_set(o1=1.3, o2=1.2, o3=1.25, paged=0.3) -> pd.DataFrame:
    return runs(vision("O1", O1, o1) + vision("O2", O2, o2) + llm(o3, paged))


def judge(df: pd.DataFrame) -> dict[str, dict]:
    """Our claims on the per-run table of `df`, with the driver's and the module's gates."""
    t = fo.per_run(df)
    gates = {**driver.default_gates(df), **fo.gates(df, t)}
    ours = [c for c in cs.load() if cs.origin(c) == cs.OURS]
    return {c["id"]: cl.judge(c, t, None, gates) for c in ours}


def test_waterfall_speedups_are_exact_and_repeats_share_one_baseline():
    df = runs(vision("O1", O1[:3], 1.5, gpus=(1,)))
    rep = df.iloc[[0, 0]].assign(images_per_s=[110.0, 90.0], seed=[1, 2], run=["r0s1", "r0s2"])
    t = fo.per_run(pd.concat([df, rep], ignore_index=True))
    assert list(t["step"]) == [0, 0, 0, 1, 2]
    # step 0's repeats 100, 110, 90: each against their median 100
    assert t["speedup_vs_faithful"].tolist()[:3] == pytest.approx([1.0, 1.1, 0.9])
    assert t.loc[3, "speedup_vs_prev"] == pytest.approx(1.5)
    assert t.loc[4, "speedup_vs_prev"] == pytest.approx(1.5)
    assert t.loc[4, "speedup_vs_faithful"] == pytest.approx(2.25)
    assert pd.isna(t.loc[0, "speedup_vs_prev"])
    assert t.loc[4, "unit"] == "images/s" and t.loc[4, "throughput"] == pytest.approx(225.0)
    comp = fo.compact(t)
    assert list(comp["step_label"]) == O1[:3]
    one = comp.iloc[1]  # step 1 (150) over step 0 (median 100, 90-110)
    assert one["throughput"] == 150 and one["speedup_vs_prev"] == pytest.approx(1.5)
    assert one["speedup_vs_prev_min"] == pytest.approx(150 / 110)
    assert one["speedup_vs_prev_max"] == pytest.approx(150 / 90)
    assert comp.iloc[0]["throughput_min"] == 90 and comp.iloc[0]["repeats"] == 3
    assert comp.iloc[2]["accuracy_pct"] == 98.0


def test_llm_rows_read_tokens_and_the_tail_loss_and_o4_shares_o3_s_faithful_run():
    t = fo.per_run(runs(llm(1.25, 0.7)))
    o3 = t[t["experiment"] == "O3"]
    assert o3["speedup_vs_faithful"].tolist() == pytest.approx([1.0, 1.25, 1.5625])
    assert set(o3["unit"]) == {"tokens/s"} and set(o3["loss_field"]) == {"tail_loss"}
    assert o3["loss"].tolist() == pytest.approx([1.0, 1.0, 1.05])
    o4 = t[t["experiment"] == "O4"].set_index("step_label")
    assert o4.loc["adamw", "tokens_per_s"] == o3.iloc[0]["tokens_per_s"]
    assert o4.loc["paged_adamw8bit", "peak_memory_gib"] == pytest.approx(7.0)
    # a run from before tail_loss existed: the last step's loss
    old = fo.per_run(runs(llm(1.25, 0.7)).drop(columns="tail_loss").assign(final_loss=2.0))
    assert set(old["loss_field"].dropna()) == {"final_loss"} and set(old["loss"]) == {2.0}


def test_a_step_that_did_not_run_shows_its_status_and_breaks_the_chain():
    df = runs(vision("O1", O1[:3], 1.5, gpus=(1,)))
    df.loc[1, ["status", "error"]] = ["unsupported", "bf16 autocast: this GPU has no bf16"]
    t = fo.per_run(df)
    assert pd.isna(t.loc[1, "throughput"]) and pd.isna(t.loc[2, "speedup_vs_prev"])
    assert t.loc[2, "speedup_vs_faithful"] == pytest.approx(2.25)
    comp = fo.compact(t)
    assert comp.loc[1, "status"] == "unsupported" and pd.isna(comp.loc[1, "throughput"])
    assert any("unsupported here: bf16 autocast" in n for n in fo.notes(df, t))


def test_our_claims_hold_on_gpu_like_runs():
    got = judge(gpu_set())
    assert {k: v["verdict"] for k, v in got.items()} == {
        "O1a": cl.HOLDS, "O1b": cl.HOLDS, "O2a": cl.HOLDS, "O3a": cl.HOLDS, "O4a": cl.HOLDS,
    }  # fmt: skip
    assert all(v["origin"] == cs.OURS for v in got.values())
    # 3,000,000 bytes per image (500 px, fp32) against the 784 stored: 3,827x
    assert "ratio 3,827" in got["O1a"]["evidence"]
    assert got["O4a"]["paper_verdict"] == cl.UNMEASURED  # no published numbers


def test_our_claims_do_not_hold_when_the_numbers_fall_short():
    # 1.1x per step: O1 1.77x in 6 steps, O3 1.21x in 2; paged AdamW's states only 40 % leaner
    got = judge(gpu_set(o1=1.1, o3=1.1, paged=0.6))
    assert got["O1b"]["verdict"] == cl.FAILS and got["O3a"]["verdict"] == cl.FAILS
    assert got["O4a"]["verdict"] == cl.FAILS and got["O2a"]["verdict"] == cl.HOLDS
    # as fast, but 2 points less accurate: the accuracy part fails
    rows = vision("O1", O1, 1.3)
    rows[6]["final_test_accuracy_pct"] = rows[13]["final_test_accuracy_pct"] = 96.0
    got = judge(runs(rows + vision("O2", O2, 1.2) + llm(1.25, 0.7)))
    assert got["O1b"]["verdict"] == cl.FAILS and "accuracy: " in got["O1b"]["evidence"]


def test_our_claims_are_inconclusive_within_the_repeats_spread():
    df = gpu_set()
    last = df[(df["experiment"] == "O3") & (df["stage"] == "optimised")].iloc[0]
    # repeats of O3's last step at 1.3x and 1.6x beside its 1.5625x: median 1.5625 >= 1.5, one
    # below
    reps = pd.DataFrame([{**last.to_dict(), "tokens_per_s": 1000.0 * f, "seed": s,
                          "run": f"o3-last-s{s}"} for s, f in ((1, 1.3), (2, 1.6))])  # fmt: skip
    got = judge(pd.concat([df, reps], ignore_index=True))
    assert got["O3a"]["verdict"] == cl.INCONCLUSIVE and "1,300-1,600" in got["O3a"]["evidence"]
    # a vision set that did not learn: the accuracy parts decide nothing
    got = judge(runs(vision("O1", O1, 1.3, acc=40.0) + vision("O2", O2, 1.2, acc=40.0)))
    assert got["O1b"]["verdict"] == cl.INCONCLUSIVE and "did not learn" in got["O1b"]["reason"]
    # each ladder's accuracy rests on its own runs: O2's not learning leaves O1b judged
    got = judge(runs(vision("O1", O1, 1.3) + vision("O2", O2, 1.2, acc=40.0) + llm(1.25, 0.7)))
    assert got["O1b"]["verdict"] == cl.HOLDS
    assert got["O2a"]["verdict"] == cl.INCONCLUSIVE and "did not learn" in got["O2a"]["reason"]


def test_gpu_only_claims_are_not_measured_on_cpu_with_reasons():
    df = runs(vision("O1", O1, 1.3, size=48, device="cpu") + vision("O2", O2, 1.2, device="cpu")
              + llm(1.25, 0.7, device="cpu"))  # fmt: skip
    got = judge(df)
    for cid, why in (("O1a", "nothing is copied host-to-device"),
                     ("O2a", "DALI decodes on the CPU")):  # fmt: skip
        assert got[cid]["verdict"] == cl.UNMEASURED and why in got[cid]["reason"], got[cid]
    # what needs no GPU is judged on this machine: O4a on the states' bytes (0.7x here)
    assert got["O1b"]["verdict"] == cl.HOLDS and got["O3a"]["verdict"] == cl.HOLDS
    assert got["O4a"]["verdict"] == cl.FAILS and "ratio 0.700" in got["O4a"]["evidence"]


def test_o1a_at_small_images_says_the_cut_cannot_reach_100x():
    # on a GPU at 48 px the faithful batch is 27,648 bytes per image: at most 35x the stored one
    df = runs(vision("O1", O1, 1.3, size=48) + vision("O2", O2, 1.2) + llm(1.25, 0.7))
    got = judge(df)["O1a"]
    assert got["verdict"] == cl.UNMEASURED
    assert got["reason"].startswith("at 48 px the faithful input is only 35x")


def test_the_artifact_has_no_paper_numbers_and_our_claims_are_labelled():
    assert fo.ARTIFACT.paper is None
    ours = [c for c in cs.load() if cs.origin(c) == cs.OURS]
    assert {c["id"] for c in ours} == {"O1a", "O1b", "O2a", "O3a", "O4a"}
    assert all(c["source"].startswith("ours (beyond the paper)") for c in ours)
    with pytest.raises(cs.ClaimError, match="X1a: origin 'theirs' is not one of paper, ours"):
        cs.check({"id": "X1a", "origin": "theirs", "experiment": "X1", "statement": "s",
                  "source": "s", "criterion": "c", "rule": "threshold",
                  "q": {"value": "v"}, "than": 1})  # fmt: skip


def test_the_report_shows_the_section_and_counts_our_claims_apart(sandbox, monkeypatch):
    """driver.build and report.build on a matrix with V3 and O1-O4: the papers' tally counts
    V3's three claims only, ours has a tally and a table of its own, and the section says that
    there are no published numbers."""
    import yaml

    from analysis import draw as figcommon
    from report import build
    from run import store
    from run.sweep import matrix as mx

    m = yaml.safe_load(mx.matrix_file().read_text())
    m["experiments"] = {"V3": m["experiments"]["V3"]} | {
        e: {"title": f"{e} ladder", "source": "ours (beyond the paper)", "target": fo.TARGET,
            "workload": "llm" if e in ("O3", "O4") else "vision"}
        for e in ("O1", "O2", "O3", "O4")
    }  # fmt: skip
    mx.matrix_file().write_text(yaml.safe_dump(m))
    # the runs as the sweep would list them, already on their steps (the ladder's own test is
    # test_runs_of_the_matrix_land_on_their_ladder_steps)
    monkeypatch.setattr(driver, "runs_of", lambda exps, scale: (gpu_set(), []))
    monkeypatch.setattr(fo, "assign", lambda runs, scale, matrix=None: runs)
    monkeypatch.setattr(store, "REPORT_OUT_DIR", sandbox / "out")
    driver.build(fo.TARGET, "test")
    png = driver.draw(fo.TARGET, "test")
    _, meta = figcommon.load(fo.TARGET, "test")
    assert png.stat().st_size > 10_000 and png.with_suffix(".pdf").is_file()
    assert meta["paper_compact"] is None and meta["gates"] == {}
    written = build.render("test", [store.results_root()], sandbox / "out" / "test")
    md = next(p for p in written if p.suffix == ".md").read_text()
    tex = next(p for p in written if p.suffix == ".tex").read_text()
    assert "draw 3 claims from their experiments" in md  # V3's, not ours
    tallies = [ln for ln in md.splitlines() if ln.startswith("| CPU") or ln.startswith("| /")]
    assert tallies[0].endswith("| 0 | 0 | 0 | 3 |")  # V3 not built: 3 not measured
    assert tallies[1].endswith("| 5 | 0 | 0 | 0 |")  # ours: all five hold on the GPU-like set
    assert "### Beyond the paper: our own claims" in md
    assert "apart from the papers' 3." in md
    assert "Ours, beyond the paper: no published numbers" in md
    assert "**O4a** (ours, beyond the paper) Paged 8-bit AdamW" in md
    assert "| [O1b](#fig-optimized) |" in md and f"![{fo.TITLE}](figures/fig-optimized.png)" in md
    assert "Beyond the paper: our own claims" in tex and "no published numbers" in tex


def test_runs_of_the_matrix_land_on_their_ladder_steps():
    """The real matrix's O1-O4 cells for smoke, with a repeat each, as the driver lists them (a
    run shared by experiments once): every row is on the step ladder_step gives its cell, a
    repeat on its cell's step, and O3's faithful run is O4's AdamW cell too."""
    from run.sweep import matrix as mx

    exps = mx.experiments_for_target(fo.TARGET)
    specs = [s for e in exps for s in mx.expand(e, "smoke", n_repeats=2).specs]
    rows = [{**s, "status": "ok", "run": mx.run_name(s)} for s in specs]
    df = pd.DataFrame(rows).drop_duplicates("run").reset_index(drop=True)
    t = fo.table(df, "smoke")
    assert len(t) == len(specs)  # the shared run is a row of each experiment it is a cell of
    for e in exps:
        steps = mx.ladder(e)
        for s in mx.expand(e, "smoke", n_repeats=2).specs:
            row = t[(t["experiment"] == e) & (t["run"] == mx.run_name(s))]
            assert len(row) == 1, (e, mx.run_name(s))
            if steps:
                i, label = mx.ladder_step(e, s)
                assert (row["step"].iloc[0], row["step_label"].iloc[0]) == (i, label)
                assert label == steps[i][0]
                assert row["stage"].iloc[0] == ("faithful" if i == 0 else "optimised"
                                                if i == len(steps) - 1 else "")  # fmt: skip
    assert [lab for lab, _ in mx.ladder("O1")][:2] == ["faithful", "device-upsample"]
    o4 = t[t["experiment"] == "O4"].set_index("step_label")
    o3 = t[(t["experiment"] == "O3") & (t["step"] == 0) & (t["gpus"] == 1)]
    assert len(o3) == 2 and set(o3["run"]) == set(o4.loc[["adamw"], "run"])  # with its repeat
    assert (o4.loc["adamw", "step"] == 0).all() and (o4.loc["paged_adamw8bit", "step"] == 1).all()


def test_a_more_accurate_optimised_run_is_no_departure():
    # one point better than the faithful run: holds (only falling short by 0.5 point fails)
    rows = vision("O1", O1, 1.3)
    for i in (6, 13):  # the last step at each GPU count
        rows[i]["final_test_accuracy_pct"] = 99.0
    got = judge(runs(rows + vision("O2", O2, 1.2) + llm(1.25, 0.3)))
    assert got["O1b"]["verdict"] == cl.HOLDS, got["O1b"]
    assert "(criterion: at most 0.500 below)" in got["O1b"]["evidence"]
    rows[6]["final_test_accuracy_pct"] = rows[13]["final_test_accuracy_pct"] = 97.4
    got = judge(runs(rows + vision("O2", O2, 1.2) + llm(1.25, 0.3)))
    assert got["O1b"]["verdict"] == cl.FAILS  # 0.6 point below the faithful 98


def test_o4a_is_not_measured_where_the_adapters_are_too_small_for_8bit_states():
    df = gpu_set()
    df.loc[df["step_label"] == "paged_adamw8bit", "optimizer_state_8bit_share"] = 0.4
    got = judge(df)["O4a"]
    assert got["verdict"] == cl.UNMEASURED
    assert got["reason"].startswith("only 40% of the adapters' parameters have 8-bit states")
    assert judge(gpu_set())["O4a"]["verdict"] == cl.HOLDS  # all 8-bit: judged


def test_our_claims_coverage_names_the_paper_profile_not_the_paper():
    df = gpu_set()
    t = fo.per_run(df)
    gates = {**driver.default_gates(df), **fo.gates(df, t)}
    o1b = next(c for c in cs.load() if c["id"] == "O1b")
    got = cl.judge(o1b, t, None, gates, driver.paper_gpus(["O1"]))
    assert got["coverage"] == "judged on 1-2 GPU(s) (the paper scale runs 4)"
    v1a = next(c for c in cs.load() if c["id"] == "V1a")
    assert "of the paper's" in cl.coverage(cr.Outcome(True, gpus={1, 2}), [1, 2, 4], False)
    assert v1a.get("origin", cs.PAPER) == cs.PAPER


def write_profile(run_dir, sync_s: float, launch_s: float, breakdown_busy: float | None = None):
    """A profiled run's folder as the sweep leaves it: profile_metrics.csv (two ranks of nsys),
    and the breakdown CSV beside it when `breakdown_busy` is given."""
    from analysis.profiles import breakdown as bd
    from run.node import profiling

    run_dir.mkdir(parents=True)
    rows = [
        (run_dir.name, rank, "nsys", metric, metric, calls, total, None, total / 2.0)
        for rank in (0, 1)
        for metric, calls, total in (
            ("cudaStreamSynchronize", 10, sync_s),
            ("cudaLaunchKernel", 100, launch_s),
            ("cudaMalloc", 2, 0.01),
        )  # fmt: skip
    ]
    cols = ["run", "rank", "source", "metric", "raw_name", "calls", "total_s", "bytes", "share"]
    pd.DataFrame(rows, columns=cols).to_csv(run_dir / profiling.PROFILE_METRICS, index=False)
    if breakdown_busy is not None:
        split = [(run_dir.name, r, "nsys", "0", "busy", breakdown_busy, 0.5) for r in (0, 1)]
        pd.DataFrame(split, columns=bd.COLUMNS).to_csv(
            bd.breakdown_path(run_dir / profiling.PROFILE_METRICS), index=False
        )


def test_profiled_faithful_and_optimised_steps_are_diffed(sandbox):
    """Where a ladder's faithful and last steps were both profiled, the profile-diff table holds
    their change (derived totals, breakdown, top movers) and the notes say it in one line; a
    ladder with one side unprofiled, or none, adds nothing (smoke profiles no O-run)."""
    from run import store

    df = runs(vision("O1", O1, 1.3, gpus=(1,)) + llm(1.25, 0.3))
    df.attrs["scale"] = "test"
    t = fo.per_run(df)
    assert fo.extra(df, t)[fo.PROFILE_DIFF].empty  # nothing profiled: an empty table, no note
    assert not any("profiled steps" in n for n in fo.notes(df, t))
    o1 = t[t["experiment"] == "O1"]
    first, last = o1.loc[o1["step"] == 0, "run"].iloc[0], o1.loc[o1["step"] == 6, "run"].iloc[0]
    write_profile(store.run_dir("test", first), sync_s=2.0, launch_s=1.0, breakdown_busy=3.0)
    write_profile(store.run_dir("test", last), sync_s=0.5, launch_s=0.75, breakdown_busy=2.0)
    o3_first = t.loc[(t["experiment"] == "O3") & (t["step"] == 0), "run"].iloc[0]
    write_profile(store.run_dir("test", o3_first), sync_s=1.0, launch_s=1.0)  # its pair is not
    got = fo.extra(df, t)[fo.PROFILE_DIFF]
    assert list(got.columns) == fo.DIFF_COLUMNS
    assert set(got["experiment"]) == {"O1"} and set(got["optimised_step"]) == {"compile"}
    assert (got["faithful_run"] == first).all() and (got["optimised_run"] == last).all()
    seconds = got[got["field"] == "total_s"].set_index("metric")
    # summed over the two ranks: sync 4 s -> 1 s, launches 2 -> 1.5 (cudaMalloc is no paper metric)
    assert list(seconds.index[:2]) == ["paper_total", "breakdown:busy"]
    assert seconds.loc["paper_total", "change"] == pytest.approx(-3.5)
    assert seconds.loc["breakdown:busy", ["a", "b"]].tolist() == [6.0, 4.0]
    assert seconds.loc["cudaStreamSynchronize", "change_pct"] == pytest.approx(-75.0)
    assert list(seconds.index[2:4]) == ["cudaStreamSynchronize", "cudaLaunchKernel"]
    assert "cudaMalloc" not in seconds.index  # it did not move
    lines = [n for n in fo.notes(df, t) if "profiled steps" in n]
    assert lines == [
        "Beyond the paper, profiled steps of O1 at 1 GPU(s), faithful -> compile: the paper's "
        "profiler metrics 6 s -> 2.5 s (-58.3%); the top metrics' change is in "
        "fig-optimized-profile-diff.csv."
    ]


def test_runs_profiled_by_the_sweep_land_on_their_steps():
    """PROFILER=torch names every run with its profiler (-prof_torch): still on its step."""
    specs = mx.expand("O3", "smoke", n_repeats=1).specs
    rows = [{**s, "profiler": "torch", "status": "ok",
             "run": mx.run_name({**s, "profiler": "torch"})} for s in specs]  # fmt: skip
    t = fo.table(pd.DataFrame(rows), "smoke")
    o3 = t[t["experiment"] == "O3"]
    assert sorted(o3["step"]) == [0, 1, 2] and o3["run"].str.endswith("prof_torch").all()
