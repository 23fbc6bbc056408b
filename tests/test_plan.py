"""The plan (run/sweep/plan.py): states, the cost model's paper anchors, calibration, totals, nodes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from run import store
from run.llm import spec as llm_spec
from run.node import busy, profiling
from run.sweep import cost, plan
from run.sweep import matrix as mx
from run.vision import launch as vision_launch
from run.vision import spec as vision_spec

# the repository's matrix (the sandbox points run.sweep.matrix at a small one)
REAL_MATRIX = Path(__file__).resolve().parent.parent / "experiments" / "matrix.yaml"

sys.path.insert(0, str(Path(__file__).parent))
from fake_hw import CPU2  # noqa: E402

H100X4 = {**CPU2, "gpu_count": 4, "gpu_model": "NVIDIA H100 80GB HBM3", "cpu_count": 16}


@pytest.fixture
def real(tmp_path, monkeypatch):
    """The repository's matrix, an empty results folder, the default environment."""
    monkeypatch.setenv("RESULTS_DIR", str(tmp_path / "results"))
    for var in ("PROFILER", "LLAMA3_DIR", "LLAMA3_TOKENIZER"):
        monkeypatch.delenv(var, raising=False)
    return mx.load_matrix(REAL_MATRIX)


def spec_of(exp: str, scale: str, matrix: dict, **want) -> dict:
    specs = [
        s for s in mx.expand(exp, scale, matrix).specs if all(s[k] == v for k, v in want.items())
    ]
    assert len(specs) == 1, (exp, want, len(specs))
    return specs[0]


def finish(scale: str, row: plan.PlanRow, status: str = "ok", wall: float = 10.0, hw=None):
    d = store.run_dir(scale, row.name)
    store.write_json_atomic(d / store.SPEC, row.spec)
    store.write_json_atomic(d / store.PROVENANCE, {"hardware": hw if hw is not None else CPU2})
    summary = {"name": row.name, "status": status, "launch_wall_s": wall}
    store.write_json_atomic(d / store.SUMMARY, summary)


# --- states ---------------------------------------------------------------------------------------


def test_states_come_from_the_results_folder(sandbox):
    rows = plan.build("test", None, CPU2)
    names = [r.name for r in rows]
    assert len(names) == len(set(names)) and all(r.state == "missing" for r in rows)
    by = {r.name: r for r in rows}
    # V1 (DDP-DS), V3, V4, V7 and N1's first repeat share their 2-rank fp32 unpinned run: one
    # row naming all five (N1's seed1/seed2 repeats are rows of their own)
    shared = [
        r for r in rows if "mnv2-fp32-ddp_ds-2gpu-" in r.name and r.name.endswith("-nopin-e1-n64")
    ]
    assert len(shared) == 1 and shared[0].experiments == ["N1", "V1", "V3", "V4", "V7"]

    done, failed, oom = rows[0], rows[1], rows[2]
    finish("test", done)
    finish("test", failed, "failed")
    finish("test", oom, "oom")
    again = {r.name: r for r in plan.build("test", None, CPU2)}
    assert again[done.name].state == "done" and again[done.name].est_s == 0
    assert again[failed.name].state == "failed" and again[oom.name].state == "oom"
    missing = [r for r in again.values() if r.state == "missing"]
    assert len(missing) == len(rows) - 3 and all(r.est_s > 0 for r in missing)
    # failed runs are not re-run by a plain sweep: they cost nothing in the totals
    assert plan.wall_s(list(again.values())) == pytest.approx(sum(r.est_s for r in missing))
    assert by[done.name].steps == vision_spec.planned_steps(done.spec)


def test_runs_needing_more_ranks_than_the_machine_has_are_skipped(sandbox):
    one_core = {**CPU2, "cpu_count": 1, "affinity_cpus": 1}
    rows = plan.build("test", ["V3"], one_core)
    states = {r.gpus: {x.state for x in rows if x.gpus == r.gpus} for r in rows}
    assert states == {1: {"missing"}, 2: {"skipped"}}
    assert all(r.est_s == 0 for r in rows if r.state == "skipped")
    assert plan.wall_s(rows) == pytest.approx(sum(r.est_s for r in rows if r.gpus == 1))
    text = plan.render(rows, one_core, "test")
    assert "3 run(s) skipped" in text


def test_unsupported_cells_cost_nothing(real):
    rows = plan.build("quick", ["L5"], H100X4, real)
    states = {(r.spec["method"], r.gpus): r.state for r in rows}
    assert states[("qlora", 4)] == states[("qat", 1)] == "unsupported"
    assert states[("qlora", 1)] == states[("qat", 4)] == "missing"
    assert all(r.est_s == 0 for r in rows if r.state == "unsupported")


def test_run_names_carry_the_profiler_the_sweep_will_use(real, monkeypatch):
    names = [r.name for r in plan.build("quick", ["V5"], H100X4, real)]
    assert names and all(n.endswith("-prof_torch") for n in names)  # auto without nsys
    names = [r.name for r in plan.build("quick", ["V5"], {**H100X4, "nsys": "/x/nsys"}, real)]
    assert all(n.endswith("-prof_nsys") for n in names)
    monkeypatch.setenv("PROFILER", "none")
    assert not any("-prof_" in r.name for r in plan.build("quick", ["V5"], H100X4, real))


# --- the cost model's anchors ---------------------------------------------------------------------


def test_the_anchor_setup_is_the_paper_profiles_v3(real):
    spec = spec_of("V3", "paper", real, gpus=1, precision="fp32")
    assert {k: spec[k] for k in cost.ANCHOR_VISION} == cost.ANCHOR_VISION


@pytest.mark.parametrize(
    ("gpus", "precision", "paper_s"),
    [(1, "fp32", 3721), (1, "fp64", 6266), (4, "fp16", 919), (2, "fp32", 2094)],
)
def test_vision_estimate_reproduces_table2(real, gpus, precision, paper_s):
    spec = spec_of("V3", "paper", real, gpus=gpus, precision=precision)
    est = cost.estimate_s(spec, H100X4)
    assert abs(est - (paper_s + cost.VISION_STARTUP_S)) <= 0.10 * paper_s


def test_vision_pin_memory_follows_table3(real):
    off = spec_of("V4", "paper", real, gpus=1, pin_memory=False)
    on = spec_of("V4", "paper", real, gpus=1, pin_memory=True)
    ratio = (cost.estimate_s(on, H100X4) - cost.VISION_STARTUP_S) / (
        cost.estimate_s(off, H100X4) - cost.VISION_STARTUP_S
    )
    assert ratio == pytest.approx(2921 / 3792, rel=0.01)


def test_vision_strategies_and_image_size(real):
    specs = {(s["strategy"], s["gpus"]): s for s in mx.expand("V1", "paper", real).specs}
    t = {k: cost.estimate_s(s, H100X4) for k, s in specs.items()}
    assert t[("ddp_ds", 4)] < t[("ddp_rr", 4)] < t[("ddp_ds", 1)] < t[("ddp", 4)]
    small = {
        s["image_size"]: cost.estimate_s(s, H100X4)
        for s in mx.expand("V2", "paper", real).specs
        if s["gpus"] == 1
    }
    # compute grows with pixels, but 100 px is held up by the per-step floor
    assert small[500] > 20 * cost.VISION_STARTUP_S and small[100] > small[500] / 25


def test_llm_estimate_reproduces_table5(real, monkeypatch):
    monkeypatch.setenv("LLAMA3_TOKENIZER", "/models/tokenizer.model")  # the paper's tokens
    spec = spec_of("L2", "paper", real, gpus=1, pin_memory=False)
    assert spec["tokenizer"] == "llama3" and spec["method"] == "lora" and spec["batch_size"] == 2
    assert cost.llm_s_per_it(spec, H100X4) == pytest.approx(0.77)
    steps = llm_spec.planned_steps(spec)
    assert steps == 25_880
    start = cost.LLM_STARTUP_S + cost.LLM_MODEL_LOAD_S
    assert cost.estimate_s(spec, H100X4) == pytest.approx(start + steps * 0.77)
    # Table 5's 5:31:52 for the whole epoch, within 1 %
    assert steps * 0.77 == pytest.approx(5 * 3600 + 31 * 60 + 52, rel=0.01)
    four = spec_of("L2", "paper", real, gpus=4, pin_memory=False)
    assert cost.llm_s_per_it(four, H100X4) == pytest.approx(0.94)


def test_llm_methods_and_templates_are_ordered_as_the_journal(real):
    rows = {
        (r.spec["method"], r.spec["dataset"], r.gpus): cost.llm_s_per_it(r.spec, H100X4)
        for r in plan.build("paper", ["L5"], H100X4, real)
        if r.state == "missing"
    }
    for d in ("instruct", "summary", "error-correction"):
        assert rows[("lora", d, 1)] < rows[("dpo", d, 1)] < rows[("qlora", d, 1)]
        assert rows[("lora", d, 4)] < rows[("dpo", d, 4)] < rows[("qat", d, 4)]
    assert rows[("lora", "error-correction", 1)] < rows[("lora", "instruct", 1)]


def test_the_smoke_plan_adds_up_to_the_measured_smoke_make_all(real):
    rows = plan.build("smoke", None, CPU2, real)
    # 99 of the papers' experiments, 13 more of O1-O4 (issue 20), 8 noise repeats (N1/N2; their
    # seed-0 runs are V1's and L1's) and the noise cells' 4 runs beside a busy core (issue 38)
    assert len(rows) == 124
    assert sum(r.experiments in (["N1"], ["N2"]) for r in rows) == 12
    busy_rows = [r for r in rows if busy.is_busy(r.spec)]
    assert len(busy_rows) == 4 and all(r.name.endswith("-busy") for r in busy_rows)
    ours = [r for r in rows if all(e.startswith("O") for e in r.experiments)]
    assert len(ours) == 13 and all(r.state == "missing" for r in ours)
    windows = {w: profiling.window_for("smoke", w, real) for w in ("vision", "llm")}

    def launches(workload: str) -> float:
        return sum(
            cost.estimate_s(r.spec, CPU2, windows[workload])
            for r in rows
            # the measured make all below had no run beside a busy core (about 28 s more)
            if r.workload == workload and r.state == "missing" and not busy.is_busy(r.spec)
        )

    # the CPU constants are fitted (run/sweep/cost.py) to a fresh clone's smoke `make all` at one
    # compute thread per rank (issue 26): 58 vision launches measured 544 s, 51 LLM launches 287 s
    assert launches("vision") == pytest.approx(544, rel=0.05)
    assert launches("llm") == pytest.approx(287, rel=0.05)
    # with trace parsing; that fresh clone's `make all` took 16.8 min, set-up included
    assert 12 * 60 <= plan.wall_s(rows) <= 17 * 60


# --- calibration and totals -----------------------------------------------------------------------


def test_calibration_is_the_median_ratio_of_finished_runs(sandbox):
    matrix = mx.load_matrix()
    rows = plan.build("test", ["V3"], CPU2, matrix)
    assert plan.calibration("test", CPU2, matrix) == {}
    for row, ratio in zip(rows[:3], (1.0, 2.0, 5.0), strict=True):
        finish("test", row, wall=ratio * cost.estimate_s(row.spec, CPU2))
    finish("test", rows[3], "failed", wall=100 * cost.estimate_s(rows[3].spec, CPU2))
    gpu_made = {**H100X4, "gpu_model": "NVIDIA A100"}
    finish("test", rows[4], wall=50 * cost.estimate_s(rows[4].spec, CPU2), hw=gpu_made)
    assert plan.calibration("test", CPU2, matrix) == {"vision": (pytest.approx(2.0), 3)}
    after = {r.name: r for r in plan.build("test", ["V3"], CPU2, matrix)}
    last = after[rows[5].name]
    assert last.state == "missing"
    assert last.est_s == pytest.approx(2.0 * cost.estimate_s(rows[5].spec, CPU2))
    text = plan.render(
        list(after.values()),
        CPU2,
        "test",
        calib=plan.calibration("test", CPU2, matrix),
    )
    assert "calibrated on 3 local run(s) of this scale: vision x2.00 (3 runs)" in text


def test_gpu_hours_and_wall_time_count_missing_runs_only():
    def row(state, est, gpus, exp="V1"):
        return plan.PlanRow(f"r{est}-{gpus}-{state}", "vision", state, gpus, est, 1, 1, [exp])

    rows = [
        row("missing", 3600, 4),
        row("missing", 1800, 1, "V2"),
        row("done", 0, 4),
        row("failed", 900, 2),
        row("skipped", 0, 8),
    ]
    assert plan.gpu_hours(rows) == pytest.approx(4.5)
    assert plan.wall_s(rows) == 5400
    text = plan.render(rows, H100X4, "paper")
    assert "GPU-hours still to spend: 4.50" in text
    assert "wall time on this node: 1 h 30 min" in text
    assert "runs: 5 (1 done, 2 missing, 1 failed, 1 skipped)" in text
    assert "--retry-failed` would add about 15 min" in text
    per_run = [ln for ln in text.splitlines() if ln.split()[:1] in (["missing"], ["done"])]
    assert len(per_run) == 3
    assert any(
        ln.strip().startswith("V2") and "30 min, 0.50 GPU-h" in ln for ln in text.splitlines()
    )


# --- nodes and the command line -------------------------------------------------------------------


def test_a_gpu_profile_on_a_machine_without_gpus_is_planned_for_the_papers_node(
    real, monkeypatch, capsys
):
    monkeypatch.setattr(plan.hw, "probe", lambda: dict(CPU2))
    assert plan.main(["--scale", "paper", "--exp", "V3", "--exp", "L8"]) == 0
    out = capsys.readouterr().out
    assert "estimated for a 4 x H100 node; this machine has no GPU" in out
    assert " skipped " not in out and "skipped)" not in out
    rows = plan.build("paper", ["V3", "L8"], CPU2, real)
    assert max(r.gpus for r in rows) == 4 and all(r.state != "skipped" for r in rows)
    assert plan.wall_s(rows) == pytest.approx(
        plan.wall_s(plan.build("paper", ["V3", "L8"], H100X4, real))
    )
    # on a 2-GPU node the 3- and 4-GPU runs are skipped
    two = plan.build("paper", ["V3"], {**H100X4, "gpu_count": 2}, real)
    assert {r.gpus for r in two if r.state == "skipped"} == {3, 4}
    assert {
        r.gpus
        for r in plan.build("paper", ["V3"], CPU2, real, target_gpus=2)
        if r.state == "skipped"
    } == {3, 4}


def test_a_cpu_profile_on_a_cpu_machine_is_planned_for_this_machine(sandbox, monkeypatch, capsys):
    monkeypatch.setattr(plan.hw, "probe", lambda: dict(CPU2))
    assert plan.main(["--scale", "test", "--brief"]) == 0
    out = capsys.readouterr().out
    assert "estimated for this machine: no GPU, 2 CPU core(s) for gloo ranks" in out
    assert "model: a crude CPU model" in out


@pytest.mark.parametrize(
    ("argv", "what"),
    [
        (["--scale", "quick", "--exp", "V99"], "unknown experiment 'V99'"),
        (["--scale", "nope"], "unknown scale 'nope'"),
        (["--scale", "paper", "--gpus", "0"], "--gpus 0"),
    ],
)
def test_bad_input_is_one_error_line_and_exit_2(real, monkeypatch, capsys, argv, what):
    monkeypatch.setattr(plan.hw, "probe", lambda: dict(CPU2))
    assert plan.main(argv) == 2
    cap = capsys.readouterr()
    err = cap.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and what in err[0]
    assert cap.out == ""


def test_quick_fits_an_hour_on_a_4_gpu_h100_node(real, monkeypatch):
    # planned as this machine (H100X4 stands for its probe): a node that runs every cell, as the
    # paper's (numactl installed, memory for Scenario B's unpacked sets)
    monkeypatch.setattr(vision_launch, "skip_reason", lambda spec, info: "")
    rows = plan.build("quick", None, H100X4, real)
    assert all(r.state in ("missing", "unsupported") for r in rows)
    minutes = plan.wall_s(rows) / 60
    # 64 min before O1-O4, 73 before the noise cells N1/N2 (issue 26), 77 before their runs beside a
    # busy core (issue 38: 78.6 min)
    assert minutes <= 80, f"quick plans {minutes:.0f} min on 4 x H100"
    # the same plan when made on a laptop for the paper's node
    assert plan.wall_s(plan.build("quick", None, CPU2, real)) / 60 == pytest.approx(minutes)
    # and quick still has every GPU count the claims need (L1b, L8a/b/d: 1, 2 and more than 2)
    assert {r.gpus for r in rows if "L8" in r.experiments} == {1, 2, 4}


# --- the optimisations of issue 20 (O1-O4) ---------------------------------------------------------


def test_the_ladders_are_planned_with_their_cost_model(real):
    """Quick on the paper's node: each O1 step is one run; compiling costs start-up, device
    upsampling is cheaper than the faithful copy, bf16 cheaper than fp32; a packed LoRA step
    carries max_seq_len tokens and packing every row costs start-up."""
    rows = plan.build("quick", ["O1", "O3", "O4"], H100X4, real)
    o1 = {mx.ladder_step("O1", r.spec)[1]: r for r in rows if "O1" in r.experiments}
    assert list(o1) == [lab for lab, _ in mx.ladder("O1", real)]
    assert o1["faithful"].experiments == ["O1"]  # V3's run: shared when V3 is planned too
    est = {k: r.est_s for k, r in o1.items()}
    assert est["device-upsample"] < est["faithful"] and est["bf16"] < est["channels-last"]
    assert est["compile"] > est["no-host-sync"] + cost.VISION_COMPILE_S * 0.5
    llm = {r.name: r for r in rows if r.workload == "llm"}
    faithful = next(r for r in llm.values() if r.experiments == ["O3", "O4"])
    packed = next(r for n, r in llm.items() if n.endswith("-packed"))
    # packs of 1024 tokens (the step's cap) against byte-tokenised alpaca rows, fewer on average
    assert packed.spec["max_seq_len"] == 1024
    assert cost.llm_s_per_it(packed.spec, H100X4) > 1.5 * cost.llm_s_per_it(faithful.spec, H100X4)
    longer = cost.llm_s_per_it({**packed.spec, "max_seq_len": 2048}, H100X4)
    assert longer > 1.5 * cost.llm_s_per_it(packed.spec, H100X4)  # per-step cost grows with the cap
    assert packed.est_s > faithful.est_s + cost.PACK_S_PER_ROW * 50_000
    assert {r.spec["optimizer"] for r in llm.values()} == {"adamw", "paged_adamw8bit"}


def test_a_vision_cell_this_machine_cannot_run_is_unsupported_and_costs_nothing(real, monkeypatch):
    monkeypatch.setattr(
        vision_spec, "unsupported_reason", lambda s: "no C++ compiler" if s["compile"] else None
    )
    rows = plan.build("smoke", ["O1", "O2"], CPU2, real)
    off = [r for r in rows if r.state == "unsupported"]
    assert len(off) == 2 and all(r.spec["compile"] and r.est_s == 0 for r in off)
    assert all(r.reason == "no C++ compiler" for r in off)
    assert all(r.state == "missing" and r.est_s > 0 for r in rows if not r.spec["compile"])


def test_a_run_beside_a_busy_core_is_planned_with_its_burner_on_the_cores():
    """Issue 38: on a quiet 2-core CPU the burners bring the machine to three runnable processes,
    so the run beside them, 1 or 2 ranks, shares two cores among three (1.5 x its loop)."""
    window = {"wait_steps": 0, "warmup_steps": 0, "active_steps": 0, "max_seconds": 0}
    for wl, base in (
        ("vision", vision_spec.DEFAULTS),
        ("llm", {**llm_spec.DEFAULTS, "max_steps": 8}),
    ):
        for gpus, factor in ((1, 1.5), (2, 1.5)):
            plain = {**base, "gpus": gpus}
            loud = {**plain, busy.BESIDE: busy.BUSY_CORE}
            start = cost._loop_and_steps(plain, CPU2)[2]
            got = (cost.estimate_s(loud, CPU2, window) - start) / (
                cost.estimate_s(plain, CPU2, window) - start
            )
            assert got == pytest.approx(factor), (wl, gpus)
