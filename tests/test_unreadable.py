"""Unreadable results are failed runs, never a crash (store.read_summary): the plan counts them as
missing (the next sweep runs them again), the analysis and the report leave them out and name
them in one line each, and an unreadable sweep record fails its own artifact in one line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest

from analysis import driver
from report import settings
from run import store
from run.sweep import matrix as mx
from run.sweep import plan

sys.path.insert(0, str(Path(__file__).parent))
from fake_hw import CPU2  # noqa: E402

SCALE = "test"
# what each bad run's summary.json holds: cut mid-way, an opening brace, not an object
BAD = {
    "truncated": lambda full: full[: len(full) // 2],
    "brace": lambda full: "{",
    "list": lambda full: "[]",
}


def fabricate(exp: str) -> list[str]:
    """Finished ok runs of every cell of `exp` (as the plan names them) and its sweep record."""
    names = []
    for i, row in enumerate(plan.build(SCALE, [exp], CPU2)):
        d = store.run_dir(SCALE, row.name)
        store.write_json_atomic(d / store.SPEC, row.spec)
        store.write_json_atomic(d / store.PROVENANCE, {"hardware": CPU2})
        summary = {"name": row.name, "status": "ok", "device": "cpu", "launch_wall_s": 20.0 + i,
                   "total_time_s": 10.0 + i, "final_test_accuracy_pct": 90.0}  # fmt: skip
        store.write_json_atomic(d / store.SUMMARY, summary)
        names.append(row.name)
    record = {"experiment": exp, "scale": SCALE, "repeats": 1, "skipped": [],
              "runs": [{"run": n, "status": "ok", "reused": False} for n in names]}  # fmt: skip
    store.write_json_atomic(store.sweeps_dir(SCALE) / f"{exp}.json", record)
    return names


@pytest.fixture
def tree(sandbox):
    """V1 whole; V2 with three of its four runs unreadable; stray files in sweeps/."""
    fabricate("V1")
    v2 = fabricate("V2")
    good, bad = v2[0], dict(zip(BAD, v2[1:], strict=True))
    for kind, name in bad.items():
        path = store.run_dir(SCALE, name) / store.SUMMARY
        path.write_text(BAD[kind](path.read_text()))
    sweeps = store.sweeps_dir(SCALE)
    (sweeps / "notes.json").write_text('{"note": "mine"}')
    (sweeps / "V99.json").write_text("garbage")
    return good, bad


def warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("warning:")]


def test_the_plan_counts_unreadable_runs_as_missing(tree):
    good, bad = tree
    rows = {r.name: r for r in plan.build(SCALE, ["V2"], CPU2)}
    assert rows[good].state == "done"
    for name in bad.values():
        r = rows[name]
        # the sweep runs it again without --retry-failed: missing, with a cost, saying why
        assert r.state == "missing" and r.est_s > 0, (name, r.state)
        assert r.reason.startswith(plan.UNREADABLE) and "next sweep runs it again" in r.reason
        assert r in plan.to_spend(list(rows.values()))
    text = plan.render(list(rows.values()), CPU2, SCALE)
    assert "--retry-failed" not in text and "3 missing run(s) have unreadable files" in text
    # calibration learns from the readable ok runs only
    assert plan.calibration(SCALE, CPU2, mx.load_matrix())["vision"][1] == 5


def test_the_analysis_leaves_unreadable_runs_out(tree, capsys):
    good, bad = tree
    out = driver.build("fig-imagesize", SCALE)
    t = pd.read_csv(out)
    assert list(t["run"]) == [good]
    got = warnings(capsys.readouterr().err)
    assert len(got) == len(bad)  # one line each, though read again below
    for name in bad.values():
        (line,) = [w for w in got if w.startswith(f"warning: {name}: unreadable (")]
        assert "left out; the next sweep runs it again" in line
    meta = json.loads(out.with_suffix(".json").read_text())
    assert sorted(meta["left_out"]) == sorted(bad.values())
    assert any("3 run(s) left out" in n for n in meta["notes"])
    driver.build("fig-imagesize", SCALE)
    assert warnings(capsys.readouterr().err) == []  # named once per process


def test_the_report_settings_leave_unreadable_runs_out(tree, capsys):
    good, bad = tree
    order = list(mx.load_matrix()["experiments"])
    root = store.results_root()
    ran = settings.ran(root, SCALE, order)
    assert ran["runs"] == 5 and sorted(ran["unreadable"]) == sorted(bad.values())
    assert ran["experiments"] == ["V1", "V2"] and ran["status"] == {"ok": 5}
    got = warnings(capsys.readouterr().err)
    assert len(got) == len(bad) + 2, got
    for name in bad.values():
        assert sum(w.startswith(f"warning: {name}: unreadable (") for w in got) == 1
    assert sum("notes.json: not an experiment of the matrix, ignored" in w for w in got) == 1
    assert sum("V99.json: not an experiment of the matrix, ignored" in w for w in got) == 1
    settings.ran(root, SCALE, order)
    assert warnings(capsys.readouterr().err) == []  # each named once


@pytest.mark.parametrize("text", ["{", '{"experiment": "V2"}', '{"runs": [{"name": 1}]}'])
def test_an_unreadable_sweep_record_fails_its_artifact_in_one_line(tree, capsys, text):
    path = store.sweeps_dir(SCALE) / "V2.json"
    path.write_text(text)
    assert driver.main(["fig-imagesize", "--scale", SCALE]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error: ")
    assert str(path) in err and "rerun the sweep" in err and "make fig-imagesize" in err
    # the other artifacts still build
    assert driver.main(["fig-strategies", "--scale", SCALE]) == 0
    # and the report names the record and goes on
    ran = settings.ran(store.results_root(), SCALE, list(mx.load_matrix()["experiments"]))
    assert ran["experiments"] == ["V1"]
    assert any(
        f"{path}: not a readable sweep record" in w for w in warnings(capsys.readouterr().err)
    )


def test_a_table_of_only_unreadable_runs_is_one_error_line(tree, capsys):
    good, _ = tree
    path = store.run_dir(SCALE, good) / store.SUMMARY
    path.write_text("")
    assert driver.main(["fig-imagesize", "--scale", SCALE]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(err) == 1 and "every run is unreadable" in err[0] and "--exp V2" in err[0]
