"""What the sweep asks of a workload (run/sweep/workloads.py): both workloads provide all of it,
and a third one is one folder and one registry line (README, "Adding a workload")."""

from __future__ import annotations

import inspect
import json
import sys
import textwrap
from pathlib import Path

import yaml

from run import store
from run.node import probe
from run.sweep import matrix as mx
from run.sweep import plan
from run.sweep import runner as sweep
from run.sweep.workloads import WORKLOADS, Workload

MEMBERS = [
    "validate",
    "canonical",
    "run_name",
    "planned_steps",
    "unsupported_reason",
    "preflight",
    "skip_reason",
    "launch_command",
]


def test_every_registered_workload_provides_the_whole_interface() -> None:
    assert sorted(WORKLOADS) == ["llm", "vision"]
    for name, workload in WORKLOADS.items():
        assert isinstance(workload, Workload), name
        assert workload.name == name and workload.defaults["workload"] == name
        for member in MEMBERS:
            want = list(inspect.signature(getattr(Workload, member)).parameters)[1:]
            module = workload.spec_module if member in MEMBERS[:5] else workload.launch_module
            got = list(inspect.signature(getattr(module, member)).parameters)
            assert got[: len(want)] == want, (name, member)  # vision's planned_steps takes a rank
    # what the interface lists is what this test checks: nothing added on one side only
    declared = {m for m in vars(Workload) if not m.startswith("_")}
    assert declared == set(MEMBERS)


def test_the_sweep_needs_no_other_name_of_a_workload(tmp_path: Path) -> None:
    """The sweep's machinery names no workload module: only the registry does."""
    root = Path(sweep.__file__).parent
    named = [
        f.name
        for f in sorted(root.glob("*.py"))
        # the registry; the cost model's maths and its paper anchors, which are per workload
        if f.name not in ("workloads.py", "cost.py")
        and any(m in f.read_text() for m in ("run.vision", "run.llm"))
    ]
    assert named == []


TOY_SPEC = '''
"""A third workload for the test: what its spec holds, its name, its length."""
DEFAULTS = {"workload": "toy", "gpus": 1, "seed": 0, "epochs": 1, "profiler": "none", "steps": 3}


def validate(spec):
    if set(spec) != set(DEFAULTS):
        raise ValueError(f"unknown toy spec key(s): {sorted(set(spec) - set(DEFAULTS))}")


def canonical(spec):
    return dict(spec)


def run_name(spec):
    return f"toy-{spec['steps']}steps-{spec['gpus']}gpu"


def planned_steps(spec):
    return spec["steps"]


def unsupported_reason(spec):
    return None
'''

TOY_LAUNCH = '''
"""A third workload for the test: a run writes its summary and ends."""
import sys
from pathlib import Path

from toyload import spec as toy_spec


def preflight(specs):
    return None


def skip_reason(spec, info):
    return ""


def launch_command(spec, run_dir, info):
    code = (
        "import json, sys; "
        "json.dump({'status': 'ok', 'name': sys.argv[2], 'steps': int(sys.argv[3])}, "
        "open(sys.argv[1], 'w'))"
    )
    name = toy_spec.run_name(spec)
    return [sys.executable, "-c", code, str(Path(run_dir) / "summary.json"), name,
            str(spec["steps"])]
'''


def test_a_third_workload_is_one_folder_and_one_registry_line(sandbox, tmp_path, monkeypatch):
    folder = tmp_path / "toyload"
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    (folder / "spec.py").write_text(textwrap.dedent(TOY_SPEC))
    (folder / "launch.py").write_text(textwrap.dedent(TOY_LAUNCH))
    monkeypatch.syspath_prepend(str(tmp_path))
    from toyload import launch as toy_launch  # the one folder
    from toyload import spec as toy_spec

    # the one registry entry
    monkeypatch.setitem(WORKLOADS, "toy", Workload("toy", toy_spec, toy_launch))
    matrix = {
        "scales": {"test": {"description": "tests", "gpus": [1], "toy": {}}},
        "experiments": {
            "T1": {
                "title": "a third workload",
                "source": "test",
                "target": "fig-toy",
                "workload": "toy",
                "vary": {"steps": [2, 5]},
            }
        },
    }
    matrix_file = tmp_path / "toy-matrix.yaml"
    matrix_file.write_text(yaml.safe_dump(matrix))
    monkeypatch.setenv("MATRIX_FILE", str(matrix_file))

    names = mx.expand("T1", "test").run_names
    assert names == ["toy-2steps-1gpu", "toy-5steps-1gpu"]
    info = probe.probe()
    rows = plan.build("test", ["T1"], info)
    assert [(r.state, r.steps) for r in rows] == [("missing", 2), ("missing", 5)]
    assert all(r.est_s > 0 for r in rows)  # priced by the cost model's flat rate

    assert sweep.sweep(["T1"], "test") == 0
    for name, steps in zip(names, (2, 5), strict=True):
        summary = json.loads((store.run_dir("test", name) / store.SUMMARY).read_text())
        assert summary == {
            "status": "ok",
            "name": name,
            "steps": steps,
            "launch_wall_s": summary["launch_wall_s"],
        }
        assert (store.run_dir("test", name) / store.PROVENANCE).is_file()
    record = json.loads((store.sweeps_dir("test") / "T1.json").read_text())
    assert [r["status"] for r in record["runs"]] == ["ok", "ok"]
    assert [r.state for r in plan.build("test", ["T1"], info)] == ["done", "done"]
    assert sys.modules["toyload.launch"] is toy_launch
