"""Issue 20's optimised vision loop: each path trains, writes the faithful files' schema, and the
whole optimised run learns as well as the faithful one (item 6: correctness first).

The runs go through run.vision.train in this process, in a one-rank gloo group: the same code
torchrun starts, without a second interpreter's start-up per run (the 2-rank paths are in
tests/test_vision_integration.py). The learning cell's runs are made once per module
(`learning_cell`) and read by both tests that need them."""

from __future__ import annotations

import contextlib
import json
import statistics
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from run import store
from run.node import threads
from run.vision import launch as vision_launch
from run.vision import spec as vision_spec
from run.vision import train as vision

TINY = {"train_images": 48, "test_images": 16, "epochs": 1, "batch_size": 16, "image_size": 32,
        "width_mult": 0.25}  # fmt: skip
# The smoke scale's learning cell (V3/V4/V7: quarter width, 64 px, 1280 digits, lr 0.003).
SMOKE = {"train_images": 1280, "test_images": 256, "epochs": 2, "batch_size": 16, "lr": 0.003,
         "image_size": 64, "width_mult": 0.25}  # fmt: skip
SEEDS = (0, 1, 2)  # paired: the faithful and the optimised loop start from the same seeds
# every optimisation but torch.compile (compile=True beside it: the optimised runs)
FAST = {"upsample": "device", "channels_last": True, "precision": "bf16",
        "fused_optimizer": True, "host_sync": "epoch"}  # fmt: skip


@contextlib.contextmanager
def gloo_group(mp: pytest.MonkeyPatch) -> Iterator[None]:
    """A one-rank gloo process group, as torchrun would give run.vision (env://)."""
    mp.setenv("MASTER_ADDR", "127.0.0.1")
    mp.setenv("MASTER_PORT", str(29500 + (time.monotonic_ns() // 1000) % 20000))
    dist.init_process_group("gloo", rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


@contextlib.contextmanager
def cpu_share() -> Iterator[None]:
    """The compute threads run.vision gives a CPU rank (run/node/threads.py), as torchrun's ranks
    train, for runs made in this process; the process's own count is put back after. On a loaded
    2-core machine torch's default (2 threads) cost more than twice the CPU seconds for the same
    steps: a faithful cell run took 24 s of CPU on one thread, and over 54 s before the end of
    its first epoch on two, side by side."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads.per_rank())
    try:
        yield
    finally:
        torch.set_num_threads(before)


@pytest.fixture
def one_rank(sandbox, monkeypatch):
    """The sandbox, inside a one-rank gloo process group."""
    with gloo_group(monkeypatch):
        yield sandbox


@pytest.fixture(scope="module")
def learning_cell(module_sandbox):
    """The learning cell (SMOKE) with the given options, each seed's run trained once in this
    module, on first use: cell(seeds, **options) gives their run folders, training those not yet
    made in one process group, in order. The compiled-steps test reads the first optimised run
    (alone, as container/selftest.sh runs it, it trains only that one), the learning test all
    six."""
    root, mp = module_sandbox
    made: dict[str, Path] = {}

    def cell(seeds: tuple[int, ...], **options: object) -> list[Path]:
        keys = [json.dumps({**options, "seed": s}, sort_keys=True) for s in seeds]
        todo = [(k, s) for k, s in zip(keys, seeds, strict=True) if k not in made]
        if todo:
            with gloo_group(mp), cpu_share():
                for key, seed in todo:
                    run_dir = root / f"cell{len(list(root.glob('cell*')))}"
                    train(run_dir, **SMOKE, **options, seed=seed)
                    made[key] = run_dir
        return [made[k] for k in keys]

    return cell


def train(run_dir, **over) -> dict:  # noqa: ANN001
    spec = vision_spec.canonical({**vision_spec.DEFAULTS, **TINY, **over})
    vision_spec.validate(spec)
    vision_launch.preflight([spec])
    run_dir.mkdir(parents=True)
    assert vision.train(spec, run_dir, torch.device("cpu")) == 0
    return store.read_json(run_dir / store.SUMMARY)


def test_device_upsampling_fused_adam_and_epoch_sync_train_with_the_same_files(one_rank):
    faithful = train(one_rank / "faithful")
    fast = train(one_rank / "fast", **FAST)
    for s in (faithful, fast):
        assert s["status"] == "ok" and s["htod_bytes_per_image"] is None  # a CPU copies nothing
        assert s["compile_s"] is None and s["images_per_s"] > 0
    assert faithful["input_bytes_per_image"] == 4 * 3 * 32 * 32  # fp32 image_size tensor
    assert fast["input_bytes_per_image"] == 28 * 28  # the stored uint8 image
    assert fast["precision_effective"] == "bf16-autocast"
    for name in ("faithful", "fast"):
        (epoch,) = store.read_jsonl(one_rank / name / store.EPOCHS)
        assert epoch["images"] == 48 and 0 < epoch["train_loss"] < 10 and epoch["compile_s"] == 0
    # host_sync=epoch keeps the per-step timeline: the same phases and keys, one line per step
    lines = [
        [json.loads(ln) for ln in store.timeline_file(one_rank / n, 0).read_text().splitlines()]
        for n in ("faithful", "fast")
    ]
    assert [(e["phase"], e["step"]) for e in lines[0]] == [
        (e["phase"], e["step"]) for e in lines[1]
    ]
    assert {tuple(e) for e in lines[0] + lines[1]} == {("phase", "epoch", "step", "t0", "t1")}
    assert sum(e["phase"] == "train_step" for e in lines[1]) == 3


def test_fused_adam_is_what_the_loop_builds(one_rank, monkeypatch):
    made = []
    real = torch.optim.Adam

    def spy(*args, **kw):  # noqa: ANN002, ANN003, ANN202
        made.append(kw.get("fused"))
        return real(*args, **kw)

    monkeypatch.setattr(torch.optim, "Adam", spy)
    train(one_rank / "eager", epochs=1)
    train(one_rank / "fused", fused_optimizer=True)
    assert made == [None, True]  # None: torch's own default (for-loop on a CPU, foreach on a GPU)


def test_the_profiling_window_still_records_with_epoch_sync(one_rank):
    summary = train(one_rank / "prof", profiler="torch", host_sync="epoch", upsample="device",
                    train_images=128)  # fmt: skip
    assert summary["status"] == "ok"
    traces = list((one_rank / "prof").rglob("rank0.pt.trace.json.gz"))
    assert len(traces) == 1 and traces[0].stat().st_size > 1000


def test_a_spec_this_machine_cannot_run_is_recorded_unsupported(sandbox, monkeypatch):
    run_dir = sandbox / "unsupported"
    run_dir.mkdir()
    spec = vision_spec.canonical({**vision_spec.DEFAULTS, **TINY, **FAST, "compile": True})
    (run_dir / "spec.json").write_text(json.dumps(spec))
    monkeypatch.setattr(vision_spec, "unsupported_reason", lambda s: "no C++ compiler here")
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert vision.main(["--spec", str(run_dir / "spec.json"), "--run-dir", str(run_dir)]) == 0
    summary = store.read_json(run_dir / store.SUMMARY)
    assert summary == {"status": "unsupported", "error": "no C++ compiler here",
                       "name": vision_spec.run_name(spec)}  # fmt: skip
    assert sorted(p.name for p in run_dir.iterdir()) == ["spec.json", "summary.json"]


def test_a_run_by_hand_into_a_folder_not_made_yet_trains(sandbox, monkeypatch, capsys):
    """A kept run's spec run again by hand into a new folder (README, on log.txt):
    the folder is made and the run trains (it used to train, then fail writing its first
    epoch, with a traceback); a --run-dir that cannot be a folder is one line before any work."""
    spec_file = sandbox / "spec.json"
    spec_file.write_text(json.dumps(vision_spec.canonical({**vision_spec.DEFAULTS, **TINY})))
    for var, value in {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1"}.items():
        monkeypatch.setenv(var, value)
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(29500 + (time.monotonic_ns() // 1000) % 20000))
    run_dir = sandbox / "runs" / ".staging" / "gone@host-1"
    with cpu_share():
        assert vision.main(["--spec", str(spec_file), "--run-dir", str(run_dir)]) == 0
    assert store.read_json(run_dir / store.SUMMARY)["status"] == "ok"
    assert len(store.read_jsonl(run_dir / store.EPOCHS)) == 1
    capsys.readouterr()
    assert vision.main(["--spec", str(spec_file), "--run-dir", str(spec_file / "x")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: --run-dir {spec_file / 'x'}"), err
    # a spec file that is not there is named as such, whatever the run folder
    assert vision.main(["--spec", str(sandbox / "none.json"), "--run-dir", str(run_dir)]) == 2
    assert capsys.readouterr().err.strip() == f"error: no spec file at {sandbox / 'none.json'}"


@pytest.mark.integration
def test_compiled_steps_are_timed_apart_and_out_of_images_per_s(learning_cell):
    """The first optimised run of the learning cell (the first to compile in this process): the
    compiling step's extra time is compile_s, and images_per_s is the images over the rest of the
    training time. (Two compiling steps in one epoch, as a short last batch makes, add up:
    test_vision_unit's test_compile_seconds_are_the_compiling_steps_above_the_median.)"""
    (run,) = learning_cell(SEEDS[:1], compile=True, **FAST)
    summary = store.read_json(run / store.SUMMARY)
    epochs = store.read_jsonl(run / store.EPOCHS)
    assert summary["status"] == "ok" and 0 < summary["compile_s"] < summary["train_time_s"]
    assert summary["compile_s"] == pytest.approx(sum(e["compile_s"] for e in epochs), abs=2e-3)
    assert epochs[0]["compile_s"] > 0  # the compiling step is the first epoch's
    for epoch in epochs:
        # one rank: the slowest rank's own train - compile is the difference of the two columns
        assert epoch["timed_s"] == pytest.approx(
            epoch["train_time_s"] - epoch["compile_s"], abs=1e-3
        )
    rate = sum(e["images"] for e in epochs) / sum(e["timed_s"] for e in epochs)
    assert summary["images_per_s"] == pytest.approx(rate, rel=1e-3)


@pytest.mark.integration
def test_the_optimised_run_learns_as_well_as_the_faithful_one(learning_cell):
    """Item 6: on the smoke digits, every optimisation on (bf16 autocast on the CPU, as
    unsupported_reason allows here) learns as the faithful fp32 loop does after the same two
    epochs: over the same three seeds, the median test accuracy of each is at least 80 % (chance is
    10 %; a broken loop fails). Which one learns better cannot be decided at this scale: on a
    2-core Xeon with AMX-BF16 the faithful run reached 99.2 / 91.8 / 85.5 % with seeds 0 / 1 / 2
    and the optimised one 88.3 / 80.1 / 96.9 %, a seed-to-seed spread of 11-17 points (one seed,
    judged within 4 points, passed on another CPU and failed on this one)."""
    faithful_runs = learning_cell(SEEDS)
    fast_runs = learning_cell(SEEDS, compile=True, **FAST)
    faithful = [store.read_json(run / store.SUMMARY) for run in faithful_runs]
    fast = [store.read_json(run / store.SUMMARY) for run in fast_runs]
    acc_faithful = [r["final_test_accuracy_pct"] for r in faithful]
    acc_fast = [r["final_test_accuracy_pct"] for r in fast]
    print(f"faithful {acc_faithful} %; optimised {acc_fast} % (seeds {SEEDS})")
    assert statistics.median(acc_faithful) >= 80
    for s, run in zip(SEEDS, faithful_runs, strict=True):
        # the faithful loop's loss falls from the first epoch to the second
        first, second = store.read_jsonl(run / store.EPOCHS)
        assert second["train_loss"] < first["train_loss"], (s, first, second)
    assert statistics.median(acc_fast) >= 80
    # later runs in this process may reuse dynamo's compiled code: the first one compiled
    assert fast[0]["compile_s"] > 0
    assert all(r["input_bytes_per_image"] == 28 * 28 for r in fast)
