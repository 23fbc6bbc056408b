"""Ladders of experiments/matrix.yaml (run/sweep/matrix.py): cumulative steps crossed with `vary`, the
step of any spec, and one-line refusals of a ladder that cannot run, before any run."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from run.node import toolchain
from run.sweep import matrix as mx

REAL_MATRIX = Path(__file__).resolve().parent.parent / "experiments" / "matrix.yaml"


def small() -> dict:
    """A matrix of one scale with a vision ladder crossed with a GPU axis."""
    return {
        "scales": {"p": {"gpus": [1, 2], "vision": {"train_images": 64, "image_size": 32}}},
        "experiments": {
            "X1": {
                "title": "a ladder",
                "source": "ours (beyond the paper)",
                "target": "fig-x",
                "workload": "vision",
                "fixed": {"precision": "fp32", "pin_memory": False},
                "vary": {"gpus": [1, 2]},
                "ladder": [
                    {"step": "faithful"},
                    {"step": "device-upsample", "upsample": "device"},
                    {"step": "bf16", "precision": "bf16"},
                    {"step": "fused-adam", "fused_optimizer": True},
                ],
            },
            "X2": {
                "title": "the same faithful run, no ladder",
                "source": "s",
                "target": "fig-y",
                "workload": "vision",
                "fixed": {"precision": "fp32", "pin_memory": False},
                "vary": {"gpus": [1]},
            },
        },
    }


def test_steps_are_cumulative_and_crossed_with_vary():
    m = small()
    assert mx.ladder("X1", m) == [
        ("faithful", {}),
        ("device-upsample", {"upsample": "device"}),
        ("bf16", {"upsample": "device", "precision": "bf16"}),
        ("fused-adam", {"upsample": "device", "precision": "bf16", "fused_optimizer": True}),
    ]
    assert mx.ladder("X2", m) == []
    exp = mx.expand("X1", "p", m, n_repeats=1)
    assert len(exp.specs) == 4 * 2
    # the ladder innermost: each GPU count's whole waterfall in step order
    assert [s["gpus"] for s in exp.specs] == [1, 1, 1, 1, 2, 2, 2, 2]
    last = exp.specs[3]
    assert (last["upsample"], last["precision"], last["fused_optimizer"]) == (
        "device",
        "bf16",
        True,
    )
    assert exp.run_names[3] == "mnv2-bf16-ddp_ds-1gpu-32px-nopin-e2-n64-updev-fused"
    assert "step" not in last  # a label, not a spec key
    # step 0 is the plain faithful run, shared by name with an experiment without a ladder
    assert exp.run_names[0] in mx.expand("X2", "p", m).run_names
    assert mx.check_all(m) == (2, 9)


def test_ladder_step_names_any_spec_by_its_values_seed_aside():
    m = small()
    exp = mx.expand("X1", "p", m, n_repeats=2)
    assert len(exp.specs) == 16
    got = [mx.ladder_step("X1", s, m) for s in exp.specs]
    labels = [lab for lab, _ in mx.ladder("X1", m)]
    assert got == [(i, labels[i]) for i in range(4)] * 4
    faithful = dict(exp.specs[0])
    # a spec on no step: bf16 without the device upsampling before it
    assert mx.ladder_step("X1", {**faithful, "precision": "bf16"}, m) is None
    assert mx.ladder_step("X2", faithful, m) is None  # no ladder


def test_the_real_ladders_put_every_cell_on_a_step():
    real = mx.load_matrix(REAL_MATRIX)
    for e, entry in real["experiments"].items():
        steps = mx.ladder(e, real)
        if not entry.get("ladder"):
            assert steps == []
            continue
        assert steps[0][0] == "faithful" and len(steps) >= 2
        for scale in real["scales"]:
            specs = mx.expand(e, scale, real, n_repeats=1).specs
            found = [mx.ladder_step(e, s, real) for s in specs]
            assert None not in found
            assert {i for i, _ in found} == set(range(len(steps))), (e, scale)


def refused(m: dict, *, check: bool = False) -> str:
    with pytest.raises(mx.MatrixError) as exc:
        mx.check_all(m) if check else mx.expand("X1", "p", m)
    text = str(exc.value)
    assert "\n" not in text
    return text


@pytest.mark.parametrize(
    ("step", "message"),
    [
        ({"step": "bad", "colour": "red"}, "X1: ladder step 4 'bad': unknown vision spec key(s): colour"),
        ({"step": "again", "precision": "bf16"}, "X1 (p, ladder step 'again'): changes nothing from step 'fused-adam'"),
        ({"step": "empty"}, "X1: ladder step 4 'empty': changes nothing (the step sets no key)"),
        ({"step": "bf16", "compile": True}, "X1: ladder step 4 'bf16': the label is used by an earlier step"),
        ({"step": "gpus", "gpus": 2}, "'gpus' cannot be a ladder key"),
        ({"compile": True}, "X1: ladder step 4 needs a label"),
        ({"step": "c", "compile": {"p": True}}, "must be one value for every scale"),
        ({"step": "b", "scenario": "B"}, "X1 (p, ladder step 'b'): upsample=device"),
        ({"step": "c", "compile": "yes"}, "X1 (p, ladder step 'c'): compile='yes' is not one of"),
    ],
)  # fmt: skip
def test_a_bad_step_is_one_line_naming_the_experiment_and_step(step, message):
    m = small()
    m["experiments"]["X1"]["ladder"].append(step)
    assert message in refused(m)
    assert message in refused(copy.deepcopy(m), check=True)


def test_a_ladder_key_set_per_profile_elsewhere_is_refused():
    m = small()
    m["experiments"]["X1"]["fixed"]["precision"] = {"p": "fp32"}
    assert "'precision' is set per scale elsewhere" in refused(m)
    m = small()
    m["scales"]["p"]["vision"]["upsample"] = "host"
    assert "'upsample' is set per scale elsewhere" in refused(m)


def test_the_matrix_check_refuses_an_unknown_key_or_impossible_combination_in_one_line(
    tmp_path, monkeypatch, capsys
):
    """`python -m run.sweep.matrix --check` (make matrix, make test) on a matrix with a bad O entry:
    one line, exit 2, nothing on stdout."""
    import yaml

    cases = {
        "sync": ({"step": "x", "host_sync": "never"}, "host_sync='never' is not one of"),
        "key": ({"step": "x", "cuda_graphs": True}, "unknown vision spec key(s): cuda_graphs"),
        "scenario B": ({"step": "x", "scenario": "B"}, "Scenario A only"),
    }
    for step, message in cases.values():
        m = small()
        m["experiments"]["X1"]["ladder"].append(step)
        path = tmp_path / "m.yaml"
        path.write_text(yaml.safe_dump(m))
        monkeypatch.setenv("MATRIX_FILE", str(path))
        assert mx.main(["--check"]) == 2
        cap = capsys.readouterr()
        err = cap.err.strip().splitlines()
        assert cap.out == "" and len(err) == 1 and err[0].startswith("error: X1")
        assert message in err[0]
    # an LLM combination that cannot run (packed DPO) is refused the same way
    m = mx.load_matrix(REAL_MATRIX)
    o3 = m["experiments"]["O3"]
    o3["fixed"] = {**o3["fixed"], "method": "dpo"}
    with pytest.raises(mx.MatrixError, match=r"^O3 \(smoke, ladder step '.*'\): packed=true"):
        mx.check_all(m)


def test_a_step_changing_nothing_in_the_spec_is_refused_even_when_it_sets_a_key():
    m = small()
    m["experiments"]["X1"]["ladder"].insert(1, {"step": "pinned?", "pin_memory": False})
    assert "X1 (p, ladder step 'pinned?'): changes nothing from step 'faithful'" in refused(m)


def test_bench_optimize_compares_each_ladders_first_and_last_step_on_one_device(capsys):
    """`make bench-optimize` takes O1's and O3's faithful and fully optimised cells (not timed
    here: a bench is no test); bad counts are one line and exit 2."""
    from run.bench import optimize as bench_optimize

    for exp in ("O1", "O3"):
        first, last = bench_optimize.ends(exp)
        assert first["gpus"] == last["gpus"] == 1
        assert mx.ladder_step(exp, first)[0] == 0
        assert mx.ladder_step(exp, last)[0] == len(mx.ladder(exp)) - 1
    assert bench_optimize.main(["--repeats", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ")


@pytest.mark.integration
def test_bench_optimize_says_unsupported_where_compile_cannot_run(capsys, monkeypatch):
    """Without inductor's needs, both optimised sides (compiled) are rows saying why, never an
    error; the faithful sides still run."""
    from run.bench import optimize as bench_optimize

    monkeypatch.setattr(toolchain, "compile_blocker", lambda: "no compiler here")
    assert bench_optimize.main(["--steps", "1", "--repeats", "1", "--llm-steps", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    rows = {tuple(line.split()[:2]): line for line in out if line.startswith(("vision ", "llm "))}
    for workload in ("vision", "llm"):
        assert (
            "unsupported" in rows[workload, "optimised"]
            and "no compiler" in rows[workload, "optimised"]
        )
        assert "/s" in rows[workload, "faithful"]
