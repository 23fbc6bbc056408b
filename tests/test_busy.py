"""Noise measured beside a busy core (issue 38): the noise cells' extra run, declared in the matrix,
run by the sweep beside a burner that never outlives it, and counted in its cell's set of spread."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from fake_hw import CPU2  # tests/ is on sys.path (pytest rootdir)

from analysis import noise
from run import store
from run.llm import spec as llm_spec
from run.node import busy, lifeline, provenance
from run.sweep import matrix as mx
from run.sweep import runner
from run.vision import spec as vision_spec

REPO = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------- the matrix and the names
def test_the_noise_cells_run_seed_0_once_more_beside_a_busy_core_at_the_end():
    real = mx.load_matrix()
    for exp_id, workload in (("N1", "vision"), ("N2", "llm")):
        for scale in mx.scales(real):
            exp = mx.expand(exp_id, scale, real)
            assert exp.busy_repeats == 1 and exp.repeats == 3
            loud = [s for s in exp.specs if busy.is_busy(s)]
            plain = [s for s in exp.specs if not busy.is_busy(s)]
            cells = plain[: len(loud)]  # repeat 0 of each cell, in the same order
            assert len(plain) == 3 * len(loud) and len(loud) >= 2  # one per rank count
            # last in the sweep's order, each repeat 0's work with the key and `-busy` added
            assert list(exp.specs[-len(loud) :]) == loud
            for s, c in zip(loud, cells, strict=True):
                assert {k: v for k, v in s.items() if k != busy.BESIDE} == c
                assert s[busy.BESIDE] == busy.BUSY_CORE and busy.BESIDE not in c
                assert mx.run_name(s) == f"{mx.run_name(c)}-busy"
                assert s["workload"] == workload
    # no other experiment has a run beside a busy core
    for exp_id in real["experiments"]:
        if exp_id not in ("N1", "N2"):
            assert not any(busy.is_busy(s) for s in mx.expand(exp_id, "smoke", real).specs)


@pytest.mark.parametrize("value", [-1, 4, "one", True, 1.0, {"smoke": 5}])
def test_busy_repeats_is_a_whole_number_up_to_the_repeats(value):
    m = copy.deepcopy(mx.load_matrix())
    m["experiments"]["N1"]["busy_repeats"] = value
    with pytest.raises(mx.MatrixError, match=r"^N1: busy_repeats must be a whole number from 0"):
        mx.expand("N1", "smoke", m)


def test_busy_repeats_per_scale_and_zero():
    m = copy.deepcopy(mx.load_matrix())
    m["experiments"]["N1"]["busy_repeats"] = {"smoke": 2, "quick": 0, "paper": 0}
    smoke = mx.expand("N1", "smoke", m)
    names = [mx.run_name(s) for s in smoke.specs if busy.is_busy(s)]
    assert len(names) == 4 and sum(n.endswith("-seed1-busy") for n in names) == 2
    assert not any(busy.is_busy(s) for s in mx.expand("N1", "quick", m).specs)
    mx.check_all(m)  # no run name stands for two specs
    m["experiments"]["N1"]["busy_rpeats"] = 1
    with pytest.raises(mx.MatrixError, match="unknown key 'busy_rpeats'"):
        mx.check_keys(m)


def test_the_spec_key_is_optional_checked_and_named_in_both_workloads():
    for mod in (vision_spec, llm_spec):
        spec = {**mod.DEFAULTS, "max_steps": 8} if mod is llm_spec else dict(mod.DEFAULTS)
        mod.validate(spec)  # a plain run has no `beside` key: its spec.json and name stay
        assert busy.BESIDE not in mod.DEFAULTS
        mod.validate({**spec, busy.BESIDE: busy.NOTHING})
        mod.validate({**spec, busy.BESIDE: busy.BUSY_CORE})
        with pytest.raises(ValueError, match="beside='loud' is not one of none, busy-core"):
            mod.validate({**spec, busy.BESIDE: "loud"})
        assert mod.run_name({**spec, busy.BESIDE: busy.NOTHING}) == mod.run_name(spec)
        assert mod.run_name({**spec, busy.BESIDE: busy.BUSY_CORE}) == mod.run_name(spec) + "-busy"


def test_the_provenance_records_the_load_beside_the_run():
    plain, gpu_node = {"workload": "vision", "gpus": 1}, {"gpu_count": 4}
    n, got = busy.sized({**plain, busy.BESIDE: busy.BUSY_CORE}, gpu_node)
    assert got["busy_cores"] == 1 and "not niced" in got["priority"] and "busy core" in got["note"]
    assert n == 1 and busy.sized(plain, gpu_node) == (0, {"busy_cores": 0})
    # a busy spec whose run has no command (unsupported here) had no burner beside it
    assert busy.sized({**plain, busy.BESIDE: busy.BUSY_CORE}, {}, runs=False) == (
        0,
        {"busy_cores": 0},
    )
    assert "beside" not in provenance.collect(plain, [], {})  # the sweep's runner writes it


@pytest.mark.parametrize(("ranks", "cores", "others", "n"),
                         [(1, 2, 0, 2), (2, 2, 0, 1), (2, 2, 1, 1), (1, 2, 1, 1), (1, 2, 5, 1),
                          (4, 16, 0, 13), (4, 16, 20, 1)])  # fmt: skip
def test_burners_bring_the_machine_to_one_process_over_its_cores_and_add_at_least_one(
    ranks, cores, others, n
):
    assert busy.burners_for(ranks, cores, others) == n


def test_a_cpu_busy_run_is_sized_to_the_load_found_and_a_gpu_one_gets_one(monkeypatch):
    spec = {"workload": "llm", "gpus": 1, busy.BESIDE: busy.BUSY_CORE}
    cpu2 = {"gpu_count": 0, "affinity_cpus": 2, "cpu_count": 2}
    monkeypatch.setattr(busy, "running_now", lambda: 1)  # another sweep's busy core, say
    n, rec = busy.sized(spec, cpu2)
    assert n == 1 and rec["busy_cores"] == 1 and rec["others_running"] == 1
    assert "1 other runnable process(es) found; 1 burner(s)" in rec["sized"]
    assert "than its 2 cores" in rec["sized"]
    assert busy.sized(spec, {**cpu2, "gpu_count": 4})[0] == busy.BURNERS == 1
    assert busy.sized({**spec, busy.BESIDE: busy.NOTHING}, cpu2) == (0, {"busy_cores": 0})


def test_the_running_processes_are_counted_without_the_counter():
    procs = busy.start(dict(os.environ), 2)
    try:
        time.sleep(0.2)
        assert busy.running_now() >= 2  # two spinning burners are always runnable
    finally:
        busy.stop(procs)


def test_only_repeat_never_runs_the_busy_repeat(tmp_path, monkeypatch):
    """`make all` spreads repeats 0 and 1 over the sweep (`--only-repeat k`); the busy run comes
    with the whole sweep of the noise cells at the end."""
    exp = mx.expand("N1", "smoke")
    index = runner.repeat_index(exp.specs)
    picked = {k: [s for s, i in zip(exp.specs, index, strict=True)
                  if i == k and not busy.is_busy(s)] for k in (0, 1)}  # fmt: skip
    assert all(len(v) == 2 for v in picked.values())
    # the filter sweep() applies: seen through what it hands on to the runs
    seen: list[str] = []
    monkeypatch.setenv("RESULTS_DIR", str(tmp_path))
    monkeypatch.setattr(runner.hw, "probe", lambda: dict(CPU2))
    monkeypatch.setattr(runner.hw, "max_ranks", lambda info: 2)
    monkeypatch.setattr(runner.numa, "plan", lambda *a, **k: None)
    monkeypatch.setattr(runner, "check_device", lambda *a: None)
    monkeypatch.setattr(runner.left, "skip_reason", lambda *a, **k: "")
    monkeypatch.setattr(runner.Progress, "__init__", lambda self, *a: None)
    for wl in runner.WORKLOADS.values():
        monkeypatch.setattr(wl, "preflight", lambda specs: None, raising=False)

    def attempt(spec, *a, **k):
        seen.append(mx.run_name(spec))
        return {"run": mx.run_name(spec), "status": "ok", "reused": True}

    monkeypatch.setattr(runner, "attempt", attempt)
    for k in (0, 1, 2):
        runner.sweep(["N1"], "smoke", only_repeat=k)
    assert seen and not any(n.endswith("-busy") for n in seen) and len(seen) == 6
    seen.clear()
    monkeypatch.setattr(runner.store, "write_json_atomic", lambda *a, **k: None)
    runner.sweep(["N1"], "smoke")
    assert [n.endswith("-busy") for n in seen] == [False] * 6 + [True] * 2


# ---------------------------------------------------------------- the burner
# A stand-in for a run: says how many processes of its attempt (its tag) run beside it.
PROBE = (
    "import os, sys, time; sys.path.insert(0, {repo!r}); from run.node import lifeline; "
    "print('beside', len(lifeline.members(os.environ[lifeline.ATTEMPT_ENV])), flush=True); "
    "time.sleep({sleep}); sys.exit({rc})"
)


def probe_cmd(rc: int = 0, sleep: float = 0.0) -> list[str]:
    return [sys.executable, "-c", PROBE.format(repo=str(REPO), rc=rc, sleep=sleep)]


@pytest.fixture
def burners(monkeypatch):
    """Every burner the runner starts, kept to check that each was stopped and reaped."""
    started: list = []
    real = busy.start

    def start(env, n=busy.BURNERS):
        procs = real(env, n)
        started.extend(procs)
        return procs

    monkeypatch.setattr(busy, "start", start)
    monkeypatch.setenv("HEARTBEAT_S", "0.2")
    monkeypatch.delenv("RUN_TIMEOUT_S", raising=False)
    return started


def _gone(procs) -> bool:
    return all(p.returncode is not None and not Path(f"/proc/{p.pid}").exists() for p in procs)


def _tag(tmp_path: Path) -> str:
    return lifeline.new_attempt(tmp_path / "run")


def run_busy(cmd, log, progress, tag, busy_core=True):  # noqa: ANN001, ANN201
    """What the sweep does with a run's command (runner._run_in)."""
    with busy.beside(busy_core, {**os.environ, lifeline.ATTEMPT_ENV: tag}):
        return runner.run_logged(cmd, log, progress, "r", tag)


@pytest.mark.parametrize("rc", [0, 3])
def test_the_burner_runs_beside_the_command_and_stops_with_it(tmp_path, burners, rc):
    log = tmp_path / "log.txt"
    tag = _tag(tmp_path)
    got, _ = run_busy(probe_cmd(rc), log, None, tag)
    assert got == rc and "beside 1" in log.read_text()
    assert len(burners) == busy.BURNERS == 1 and _gone(burners)
    assert lifeline.members(tag) == []
    # a plain run has nothing beside it
    got, _ = run_busy(probe_cmd(), log, None, _tag(tmp_path), busy_core=False)
    assert got == 0 and log.read_text().splitlines()[-1] == "beside 0" and len(burners) == 1


def test_the_burner_stops_on_a_timeout(tmp_path, burners, monkeypatch):
    monkeypatch.setenv("RUN_TIMEOUT_S", "1")
    tag = _tag(tmp_path)
    t0 = time.monotonic()
    got, _ = run_busy(probe_cmd(sleep=30), tmp_path / "log", None, tag)
    assert got is None and time.monotonic() - t0 < 15
    assert len(burners) == 1 and _gone(burners) and lifeline.members(tag) == []


def test_the_burner_stops_when_the_sweep_is_interrupted(tmp_path, burners):
    class Interrupting:  # Ctrl-C at the first heartbeat
        def heartbeat(self, *a):
            raise KeyboardInterrupt

    tag = _tag(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        run_busy(probe_cmd(sleep=30), tmp_path / "log", Interrupting(), tag)
    assert len(burners) == 1 and _gone(burners) and lifeline.members(tag) == []


def test_the_burner_stops_when_the_command_cannot_start(tmp_path, burners):
    tag = _tag(tmp_path)
    with pytest.raises(FileNotFoundError):
        run_busy([str(tmp_path / "no-such-program")], tmp_path / "log", None, tag)
    assert len(burners) == 1 and _gone(burners) and lifeline.members(tag) == []


def test_a_burner_is_tied_to_the_sweep_and_carries_the_attempt(tmp_path):
    tag = _tag(tmp_path)
    procs = busy.start({**os.environ, lifeline.ATTEMPT_ENV: tag})
    try:
        time.sleep(0.2)
        assert lifeline.members(tag) == [p.pid for p in procs]  # found by lifeline.stop too
        assert procs[0].poll() is None
    finally:
        busy.stop(procs)
    assert _gone(procs)


def test_a_sweep_runs_only_the_busy_runs_beside_a_burner_and_leaves_none(fake, burners):
    """N1 of the tests' matrix with fake runs: 6 plain runs, then 2 beside a busy core."""
    assert runner.sweep(["N1"], "test") == 0
    names = fake.read_text().split()
    assert len(names) == 8 and [n.endswith("-busy") for n in names] == [False] * 6 + [True] * 2
    assert _gone(burners)
    assert lifeline.members(f"{store.runs_dir('test').resolve()}/") == []
    started = 0
    for name in names:
        run = store.run_dir("test", name)
        prov = store.read_json(run / store.PROVENANCE)
        lines = (run / store.LOG).read_text().splitlines()
        loud = name.endswith("-busy")
        n = prov["beside"]["busy_cores"]
        started += n
        if loud:  # sized to the load found: cores + OVER_CORES runnable, at least one burner
            others, spec = prov["beside"]["others_running"], store.read_json(run / store.SPEC)
            assert n == busy.burners_for(spec["gpus"], len(os.sched_getaffinity(0)), others)
            assert f"{others} other runnable" in prov["beside"]["sized"]
        else:
            assert n == 0
        said = lines[1:2] == [busy.note({busy.BESIDE: busy.BUSY_CORE}, n).strip()]
        assert said == loud and lines[0].startswith("$ ")
        assert store.read_summary(run)["status"] == "ok"
    assert started == len(burners)  # each burner a provenance names was started, and stopped
    record = store.read_json(store.sweeps_dir("test") / "N1.json")
    assert {r["run"] for r in record["runs"]} == set(names)


# ---------------------------------------------------------------- the spread it adds
def _run(root, name, spec, summary):
    d = root / "t" / "runs" / name
    d.mkdir(parents=True)
    (d / "spec.json").write_text(json.dumps(spec))
    (d / "summary.json").write_text(json.dumps({"status": "ok", **summary}))
    (d / "provenance.json").write_text(json.dumps({"numa": {"bound": False}}))
    return {**spec, **summary, "status": "ok", "run": name, "experiments": "N2"}


def test_the_busy_run_is_in_its_cells_set_and_sets_the_margin(tmp_path, monkeypatch):
    monkeypatch.setenv("RESULTS_DIR", str(tmp_path))
    v = {"workload": "llm", "gpus": 2, "pin_memory": False, "seed": 0}
    rows = [
        *(_run(tmp_path, f"s{k}", {**v, "seed": k}, {"s_per_it": t, "device": "cpu"})
          for k, t in enumerate([1.0, 1.1, 0.9])),
        # seed 0's work beside a busy core (an old run's spec has no `beside` key at all)
        _run(tmp_path, "s0-busy", {**v, busy.BESIDE: busy.BUSY_CORE},
             {"s_per_it": 2.0, "device": "cpu"}),
    ]  # fmt: skip
    t = noise.table(pd.DataFrame(rows), "t")
    t = t[t["measure"] == "s_per_it"]
    assert len(t) == 1
    row = t.iloc[0]
    assert row["runs"] == 4 and "s0-busy" in row["run"]
    assert row["kind"] == "seed repeats and a run beside a busy core"
    assert row["spread_pct"] == pytest.approx(100 * 1.1 / 1.05)  # (2.0 - 0.9) / median
    m, text, _ = noise.Floor(t).margin("llm", {"s_per_it"}, {2})
    assert m == pytest.approx(2 * 1.1 / 1.05) and "a run beside a busy core" in text
    # without it, the quiet seeds alone: 20 %
    quiet = noise.table(pd.DataFrame(rows[:3]), "t")
    assert quiet[quiet["measure"] == "s_per_it"]["spread_pct"].iloc[0] == pytest.approx(20.0)


def test_a_burner_dies_with_a_killed_sweep(tmp_path):
    """SIGKILL leaves the sweep no finally: the parent-death signal stops the burner anyway."""
    tag = _tag(tmp_path)
    code = (
        f"import os, sys, time; sys.path.insert(0, {str(REPO)!r}); from run.node import busy; "
        f"busy.start({{**os.environ, {lifeline.ATTEMPT_ENV!r}: {tag!r}}}); print('up', flush=True); "
        "time.sleep(60)"
    )
    sweep = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert sweep.stdout.readline().strip() == "up"
        assert len(lifeline.members(tag)) == 1
        sweep.kill()
        sweep.wait()
        deadline = time.monotonic() + 10
        while lifeline.members(tag) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert lifeline.members(tag) == []
    finally:
        sweep.kill()
        sweep.wait()
        lifeline.stop(tag)
