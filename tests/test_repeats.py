"""REPEATS=n: each run spec n times with seeds seed..seed+n-1; repeats collapsed for the tables."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pandas as pd
import pytest

from analysis import common
from analysis.repeats import collapse
from run import store
from run.llm import spec as llm_spec
from run.sweep import matrix as mx
from run.sweep import plan
from run.sweep import runner as sweep
from run.vision import spec as vision_spec

sys.path.insert(0, str(Path(__file__).parent))
from fake_hw import CPU2  # noqa: E402

# the repository's matrix (the sandbox points run.sweep.matrix at a small one)
REAL_MATRIX = Path(__file__).resolve().parent.parent / "experiments" / "matrix.yaml"


@pytest.fixture
def real(monkeypatch):
    for var in ("REPEATS", "PROFILER", "LLAMA3_DIR", "LLAMA3_TOKENIZER"):
        monkeypatch.delenv(var, raising=False)
    return mx.load_matrix(REAL_MATRIX)


# ---------------------------------------------------------------- REPEATS
@pytest.mark.parametrize("raw,n", [(None, 1), ("", 1), ("1", 1), ("3", 3), (" 2 ", 2)])
def test_repeats_reads_the_environment(monkeypatch, raw, n):
    if raw is None:
        monkeypatch.delenv("REPEATS", raising=False)
    else:
        monkeypatch.setenv("REPEATS", raw)
    assert mx.repeats() == n


@pytest.mark.parametrize("raw", ["0", "-1", "x", "1.5", "two"])
def test_a_bad_repeats_value_is_one_clear_line(monkeypatch, raw, real):
    monkeypatch.setenv("REPEATS", raw)
    msg = f"REPEATS must be a whole number >= 1, got '{raw}'"
    with pytest.raises(mx.MatrixError) as exc:
        mx.repeats()
    assert str(exc.value) == msg
    with pytest.raises(mx.MatrixError, match="REPEATS must be a whole number"):
        mx.expand("V3", "smoke", real)  # everything that expands the matrix refuses it
    assert mx.main(["--scale", "smoke", "--exp", "V3"]) == 2


@pytest.mark.parametrize("exp_id", ["V3", "L1"])
def test_repeat_0_is_todays_run_and_repeat_k_has_seed_plus_k(monkeypatch, real, exp_id):
    one = mx.expand(exp_id, "smoke", real)
    monkeypatch.setenv("REPEATS", "3")
    three = mx.expand(exp_id, "smoke", real)
    m = len(one.specs)
    assert one.repeats == 1 and three.repeats == 3
    assert len(three.specs) == 3 * m
    # repeat 0: the very same specs and names as without REPEATS, first
    assert list(three.specs[:m]) == list(one.specs)
    assert three.run_names[:m] == one.run_names
    assert not any("seed" in n for n in one.run_names)
    for k in (1, 2):
        for base, rep in zip(one.specs, three.specs[k * m : (k + 1) * m], strict=True):
            assert rep == {**base, "seed": base["seed"] + k}  # only the seed differs
            assert mx.run_name(rep) == f"{mx.run_name(base)}-seed{base['seed'] + k}"
    assert len(set(three.run_names)) == 3 * m


def test_the_seed_suffix_comes_from_the_spec_in_both_workloads():
    v = dict(vision_spec.DEFAULTS)
    assert vision_spec.run_name({**v, "seed": 2}) == vision_spec.run_name(v) + "-seed2"
    lm = llm_spec.canonical(dict(llm_spec.DEFAULTS))
    assert llm_spec.run_name({**lm, "seed": 1}) == llm_spec.run_name(lm) + "-seed1"
    with pytest.raises(ValueError, match="seed=-1"):
        vision_spec.validate({**v, "seed": -1})


def test_every_experiment_multiplies_by_repeats_and_the_check_passes(monkeypatch, real):
    ones = {e: mx.expand(e, "smoke", real) for e in real["experiments"]}
    _, n_one = mx.check_all(real)
    own = [e for e, x in real["experiments"].items() if x.get("repeats", 1) > 1]
    # specs of N1/N2 over every scale: they run 3 repeats with REPEATS=1 and with 2 alike
    n_own = sum(len(mx.expand(e, p, real).specs) for e in own for p in real["scales"])
    monkeypatch.setenv("REPEATS", "2")
    for e, one in ones.items():
        two = mx.expand(e, "smoke", real)
        own = real["experiments"][e].get("repeats", 1)  # N1/N2 run 3 whatever REPEATS says
        assert len(two.specs) == max(2, own) * len(one.specs) // own, e
        assert two.run_names[: len(one.specs)] == one.run_names, e
    _, n_two = mx.check_all(real)  # names stay unique per spec with repeats too
    assert n_two == 2 * n_one - n_own


def test_the_plan_counts_repeats(sandbox, monkeypatch):
    monkeypatch.delenv("REPEATS", raising=False)
    one = plan.build("test", ["V3"], CPU2)
    monkeypatch.setenv("REPEATS", "2")
    two = plan.build("test", ["V3"], CPU2)
    assert len(two) == 2 * len(one)
    assert sum(r.name.endswith("-seed1") for r in two) == len(one)
    assert plan.wall_s(two) == pytest.approx(2 * plan.wall_s(one))
    assert "REPEATS=2" in plan.render(two, CPU2, "test")


# ---------------------------------------------------------------- the sweep
def test_a_sweep_records_every_repeat_and_reruns_only_missing_ones(fake, monkeypatch):
    monkeypatch.delenv("REPEATS", raising=False)
    sweep.sweep(["V3"], "test")
    first = fake.read_text().split()
    assert len(first) == 6  # 3 precisions x 2 ranks
    # REPEATS=2 afterwards: the runs already made are repeat 0; only the seed-1 runs are new
    monkeypatch.setenv("REPEATS", "2")
    sweep.sweep(["V3"], "test")
    new = fake.read_text().split()[len(first) :]
    assert len(new) == 6 and all(n.endswith("-seed1") for n in new)
    rec = store.read_json(store.sweeps_dir("test") / "V3.json")
    assert rec["repeats"] == 2 and len(rec["runs"]) == 12
    assert all(r["status"] == "ok" for r in rec["runs"])
    for name in new:
        spec = store.read_json(store.run_dir("test", name) / store.SPEC)
        assert spec["seed"] == 1
        assert store.read_json(store.run_dir("test", name) / store.SUMMARY)["name"] == name
    # a rerun launches nothing; a lost repeat (as a killed sweep leaves it) is the only one rerun
    n = len(fake.read_text().split())
    sweep.sweep(["V3"], "test")
    assert len(fake.read_text().split()) == n
    lost = new[0]
    store.run_dir("test", lost).joinpath(store.SUMMARY).unlink()
    sweep.sweep(["V3"], "test")
    assert fake.read_text().split()[n:] == [lost]


# ---------------------------------------------------------------- collapse
def per_run() -> pd.DataFrame:
    nan = math.nan
    return pd.DataFrame(
        [
            # cell (fp32, 1): three repeats, one value missing in the middle
            {"precision": "fp32", "gpus": 1, "seed": 0, "run": "a", "t": 10.0, "m": 1.0},
            {"precision": "fp32", "gpus": 1, "seed": 1, "run": "a-seed1", "t": 14.0, "m": nan},
            {"precision": "fp32", "gpus": 1, "seed": 2, "run": "a-seed2", "t": 11.0, "m": 3.0},
            # cell (fp32, 2): kept apart by the gpus key
            {"precision": "fp32", "gpus": 2, "seed": 0, "run": "b", "t": 6.0, "m": 2.0},
            {"precision": "fp32", "gpus": 2, "seed": 1, "run": "b-seed1", "t": 8.0, "m": 2.0},
            # cell (fp16, 1): one run
            {"precision": "fp16", "gpus": 1, "seed": 0, "run": "c", "t": 5.0, "m": 0.5},
        ]
    )


def test_collapse_gives_median_min_max_and_repeats():
    out = collapse(per_run(), ["t", "m"])
    assert list(out.columns) == [
        "precision",
        "gpus",
        "run",
        "t",
        "t_min",
        "t_max",
        "m",
        "m_min",
        "m_max",
        "repeats",
    ]
    assert out[["precision", "gpus"]].values.tolist() == [["fp32", 1], ["fp32", 2], ["fp16", 1]]
    a, b, c = (out.iloc[i] for i in range(3))
    assert (a["t"], a["t_min"], a["t_max"], a["repeats"]) == (11.0, 10.0, 14.0, 3)
    assert (a["m"], a["m_min"], a["m_max"]) == (2.0, 1.0, 3.0)  # NaN left out
    assert a["run"] == "a, a-seed1, a-seed2"
    assert (b["t"], b["t_min"], b["t_max"], b["repeats"]) == (7.0, 6.0, 8.0, 2)
    # one run: the same values, min == max == value, one repeat
    assert (c["t"], c["t_min"], c["t_max"], c["repeats"], c["run"]) == (5.0, 5.0, 5.0, 1, "c")
    assert out["repeats"].dtype.kind == "i"


def test_collapse_of_single_runs_changes_no_value():
    t = per_run().drop_duplicates(subset=["precision", "gpus"])
    out = collapse(t, ["t", "m"])
    assert out["t"].tolist() == t["t"].tolist() == out["t_min"].tolist() == out["t_max"].tolist()
    assert out["repeats"].tolist() == [1, 1, 1] and out["run"].tolist() == t["run"].tolist()


def test_collapse_counts_ok_repeats_and_keeps_failed_cells():
    t = per_run().drop(columns="m").assign(status="ok")  # every column not collapsed is a key
    t.loc[1, "status"] = "oom"  # its 14 s must not move the median of (fp32, 1)
    t.loc[5, ["status", "t"]] = ["failed", math.nan]
    out = collapse(t, ["t"])
    assert len(out) == 3  # status splits no cell
    a, c = out.iloc[0], out.iloc[2]
    assert (a["status"], a["repeats"], a["t"], a["t_max"]) == ("ok", 2, 10.5, 11.0)
    assert a["run"] == "a, a-seed1, a-seed2"
    assert c["status"] == "failed" and c["repeats"] == 0 and math.isnan(c["t"])


def test_collapse_of_an_empty_table_and_a_missing_column():
    empty = collapse(per_run().iloc[:0], ["t"])
    assert empty.empty and {"t", "t_min", "t_max", "repeats"} <= set(empty.columns)
    with pytest.raises(ValueError, match="no column"):
        collapse(per_run(), ["nope"])


def test_speed_ups_of_repeats_share_the_median_1_gpu_baseline():
    t = pd.DataFrame({"gpus": [1, 1, 1, 2, 2], "pin_memory": [False, False, True, False, True],
                      "total_time_s": [10.0, 12.0, 8.0, 5.5, 4.0], "status": "ok"})  # fmt: skip
    got = common.speedups(t, by=["pin_memory"])["speedup_vs_1gpu"].round(3).tolist()
    # unpinned baseline median(10, 12) = 11 for both repeats and the 2-GPU run; pinned 8
    assert got == [1.1, 0.917, 1.0, 2.0, 2.0]


def test_collapse_groups_missing_keys_together():
    t = pd.DataFrame(
        {"loader": [None, math.nan, "dali"], "seed": [0, 1, 0], "run": ["x", "x-seed1", "y"]}
    ).assign(t=[1.0, 3.0, 5.0])
    out = collapse(t, ["t"])
    assert out["repeats"].tolist() == [2, 1] and out["t"].tolist() == [2.0, 5.0]
