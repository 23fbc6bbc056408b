"""Every matrix entry validates without running; bad entries are refused with a clear message."""

from __future__ import annotations

import copy
import os
import subprocess
import sys

import pytest
import yaml

from run.sweep import matrix as mx
from run.vision import spec as vision_spec


def test_every_entry_of_every_profile_validates():
    real = mx.load_matrix(mx.matrix_file())
    entries, specs = mx.check_all(real)
    n_exp, n_prof = len(real["experiments"]), len(real["scales"])
    # V1..V11 and L1..L9 of EXPERIMENTS.md, O1..O4 beyond the papers, N1/N2 the noise floor
    assert n_exp == 26
    assert n_prof == 3
    assert entries == n_exp * n_prof
    expected = sum(
        len(mx.expand(e, p, real).specs) for p in real["scales"] for e in real["experiments"]
    )
    assert specs == expected and specs > 200


def test_experiment_ids_match_the_paper_list_and_ours_are_labelled_apart():
    exps = mx.load_matrix(mx.matrix_file())["experiments"]
    paper = {f"V{i}" for i in range(1, 12)} | {f"L{i}" for i in range(1, 10)}
    ours = {f"O{i}" for i in range(1, 5)}
    noise = {"N1", "N2"}  # the verdicts' noise floor (issue 26): one table, no claims
    assert set(exps) == paper | ours | noise
    assert {exps[e]["target"] for e in noise} == {"table-noise"}
    assert all(exps[e].get("repeats") == 3 for e in noise)
    assert len({exps[e]["target"] for e in paper}) == 20
    assert {exps[e]["target"] for e in ours} == {"fig-optimized"}
    assert all(exps[e]["source"] == "ours (beyond the paper)" for e in ours)
    assert not any("ours" in exps[e]["source"] for e in paper)


def test_paper_profile_has_the_papers_parameters():
    real = mx.load_matrix(mx.matrix_file())
    v3 = mx.expand("V3", "paper", real)
    assert {s["precision"] for s in v3.specs} == {"fp64", "fp32", "fp16"}
    assert {s["gpus"] for s in v3.specs} == {1, 2, 3, 4}
    assert all(s["epochs"] == 20 and s["train_images"] == 60000 for s in v3.specs)
    v2 = mx.expand("V2", "paper", real)
    assert sorted({s["image_size"] for s in v2.specs}) == [100, 200, 300, 400, 500]
    assert len(mx.expand("V1", "paper", real).specs) == 1 + 3 * 3  # 1-GPU run shared


def test_identical_specs_are_shared_between_experiments():
    real = mx.load_matrix(mx.matrix_file())
    v3 = set(mx.expand("V3", "smoke", real).run_names)
    v4 = set(mx.expand("V4", "smoke", real).run_names)
    v7 = set(mx.expand("V7", "smoke", real).run_names)
    assert v3 & v4 and v3 & v7 and v4 & v7


def test_only_the_smoke_precision_runs_are_narrowed_to_learn_in_minutes():
    """V3/V4/V7 smoke: a quarter-width MobileNetV2 on enough digits to learn (issue 10), and O1's
    smoke ladder on the same setup (its accuracy is compared step by step); Scenario B's smoke
    runs (V8-V11, O2) too, so that they learn (issue 26); every other run, and every quick or
    paper run, is the full-width model with a plain run name."""
    real = mx.load_matrix(mx.matrix_file())
    for scale in real["scales"]:
        for exp in real["experiments"]:
            e = mx.expand(exp, scale, real)
            if e.workload != "vision":
                continue
            narrow = scale == "smoke" and exp in ("V3", "V4", "V7", "O1", "V8", "V9", "V10",
                                                     "V11", "O2")  # fmt: skip
            for spec, name in zip(e.specs, e.run_names, strict=True):
                assert spec["width_mult"] == (0.25 if narrow else 1.0), (exp, scale)
                assert ("-w0.25" in name) == narrow, name
    learn = {tuple(sorted((k, v) for k, v in s.items() if k not in ("precision", "pin_memory",
             "gpus"))) for x in ("V3", "V4", "V7") for s in mx.expand(x, "smoke", real).specs}  # fmt: skip
    assert len(learn) == 1  # one learning setup, shared by the three experiments
    o1 = mx.expand("O1", "smoke", real).specs
    assert tuple(sorted((k, v) for k, v in o1[0].items() if k not in ("precision", "pin_memory",
                 "gpus"))) in learn  # fmt: skip


def test_one_rank_strategies_collapse_to_one_run():
    real = mx.load_matrix(mx.matrix_file())
    names = mx.expand("V1", "smoke", real).run_names
    assert sum("-1gpu-" in n for n in names) == 1


@pytest.mark.parametrize(
    "section,key,value,message",
    [
        ("vary", "precision", ["fp32", "fp8"], "precision='fp8'"),
        ("fixed", "strategy", "zero", "strategy='zero'"),
        ("vary", "gpus", [0, 1], "gpus=0"),
        ("fixed", "colour", "red", "unknown vision spec key"),
        ("vary", "pin_memory", [], "non-empty list"),
    ],
)
def test_bad_entries_are_refused(section, key, value, message):
    m = copy.deepcopy(mx.load_matrix(mx.matrix_file()))
    m["experiments"]["V3"][section][key] = value
    with pytest.raises(mx.MatrixError, match=message):
        mx.expand("V3", "smoke", m)


def _with(edit):  # noqa: ANN001, ANN202 - a copy of the real matrix with one edit
    m = copy.deepcopy(mx.load_matrix(mx.matrix_file()))
    edit(m)
    return m


@pytest.mark.parametrize(
    "edit,line",
    [
        (
            lambda m: m["experiments"]["V3"].update(varry=m["experiments"]["V3"].pop("vary")),
            "V3: unknown key 'varry' (known: busy_repeats, fixed, ladder, repeats, source, target, title, vary, workload)",
        ),
        (lambda m: m["experiments"]["L5"].pop("target"), "L5: missing key(s) target"),
        (
            lambda m: m["scales"]["quick"].update(gpu=[1]),
            "scale 'quick': unknown key 'gpu' (known: description, device, gpus, llm, profiling, "
            "vision)",
        ),
        (
            lambda m: m["scales"]["paper"]["profiling"].update(visoin={}),
            "scale 'paper': profiling: unknown key 'visoin' (known: llm, vision)",
        ),
        (
            lambda m: m.update(experiment={}),
            "matrix: unknown key 'experiment' (known: experiments, scales)",
        ),
        (
            lambda m: m["scales"]["smoke"].pop("gpus"),
            "V1: 'gpus: from-scale', but scale 'smoke' sets no gpus",
        ),
    ],
)
def test_a_key_the_matrix_does_not_know_is_one_line_at_any_level(edit, line, tmp_path):
    bad = tmp_path / "matrix.yaml"
    bad.write_text(yaml.safe_dump(_with(edit), sort_keys=False))
    with pytest.raises(mx.MatrixError) as err:
        mx.check_all(mx.load_matrix(bad)) if "from-scale" in line else mx.load_matrix(bad)
    assert str(err.value) == line
    # the matrix check as make test runs it: that line, exit 2, nothing else
    proc = subprocess.run(
        [sys.executable, "-m", "run.sweep.matrix", "--check"],
        env={**os.environ, "MATRIX_FILE": str(bad)}, capture_output=True, text=True,
    )  # fmt: skip
    assert (proc.returncode, proc.stderr, proc.stdout) == (2, f"error: {line}\n", "")


def test_unknown_experiment_and_profile():
    with pytest.raises(mx.MatrixError, match="unknown experiment 'V99'"):
        mx.expand("V99", "smoke")
    with pytest.raises(mx.MatrixError, match="unknown scale 'huge'"):
        mx.expand("V1", "huge")
    with pytest.raises(mx.MatrixError, match="unknown target"):
        mx.experiments_for_target("fig-nothing")


def test_run_name_spells_the_setup():
    spec = dict(vision_spec.DEFAULTS, precision="fp16", strategy="ddp_ds", gpus=2, image_size=500)
    assert vision_spec.run_name(spec) == "mnv2-fp16-ddp_ds-2gpu-500px-nopin-e2-n512"
