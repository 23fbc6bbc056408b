"""The SLURM scripts, run for real with stand-ins for sbatch, scontrol and make on the PATH."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SBATCH = REPO / "run" / "slurm" / "artifact.sbatch"
SUBMIT = REPO / "run" / "slurm" / "submit.sh"


@pytest.fixture
def fake_slurm(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """sbatch, scontrol and make that log their arguments to calls.txt (make sleeps if asked)."""
    bin_dir, calls = tmp_path / "bin", tmp_path / "calls.txt"
    bin_dir.mkdir()
    stub = '#!/bin/bash\necho "$(basename "$0") $*" >> "{calls}"\n{extra}\n'
    tools = {
        "sbatch": 'echo "4242;cluster"',
        "scontrol": "",
        "make": '[[ -n "${FAKE_MAKE_SLEEP:-}" ]] && exec sleep "$FAKE_MAKE_SLEEP"; exit 0',
    }
    for name, extra in tools.items():
        (bin_dir / name).write_text(stub.format(calls=calls, extra=extra))
        (bin_dir / name).chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("PROFILE", "SIF", "BIND")}
    env.update(PATH=f"{bin_dir}:{env['PATH']}", SLURM_SUBMIT_DIR=str(tmp_path),
               SLURM_JOB_ID="777", SIF=str(tmp_path / "none.sif"))  # fmt: skip
    return env, calls


def test_one_node_is_one_job_and_several_are_an_array_then_the_report(fake_slurm):
    env, calls = fake_slurm
    subprocess.run(["bash", str(SUBMIT)], env={**env, "NODES": "1"}, check=True, cwd=REPO)
    assert calls.read_text().splitlines() == [f"sbatch {SBATCH.relative_to(REPO)} all"]
    calls.unlink()
    subprocess.run(["bash", str(SUBMIT)], env={**env, "NODES": "3"}, check=True, cwd=REPO)
    first, second = calls.read_text().splitlines()
    assert first == "sbatch --parsable --array=1-3 run/slurm/artifact.sbatch runs"
    assert second.startswith("sbatch --dependency=afterany:4242 ") and second.endswith(" all")
    bad = subprocess.run(["bash", str(SUBMIT)], env={**env, "NODES": "0"}, cwd=REPO,
                         capture_output=True, text=True)  # fmt: skip
    assert bad.returncode == 2 and bad.stderr.strip() == "error: NODES=0 must be a positive integer"


def test_the_profile_is_left_to_the_compute_node_unless_given(fake_slurm, tmp_path):
    env, calls = fake_slurm
    out = subprocess.run(["bash", str(SBATCH), "fig-vram"], env=env, capture_output=True,
                         text=True, check=True)  # fmt: skip
    assert calls.read_text().splitlines() == ["make fig-vram"]  # the node's Makefile decides
    assert "[slurm] job 777 on " in out.stdout
    calls.unlink()
    data = tmp_path / "llama"
    data.mkdir()
    env = {**env, "PROFILE": "quick", "LLAMA3_DIR": str(data), "MNIST_DIR": "/no/such/dir"}
    out = subprocess.run(["bash", str(SBATCH)], env=env, capture_output=True, text=True,
                         check=True)  # fmt: skip
    assert calls.read_text().splitlines() == ["make PROFILE=quick all"]
    assert "warning: /no/such/dir does not exist" in out.stderr


def test_the_time_limit_signal_stops_make_and_requeues_the_job(fake_slurm):
    env, calls = fake_slurm
    proc = subprocess.Popen(["bash", str(SBATCH), "runs"], env={**env, "FAKE_MAKE_SLEEP": "60"},
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    deadline = time.time() + 20
    while time.time() < deadline and "make runs" not in (
        calls.read_text() if calls.exists() else ""
    ):
        time.sleep(0.1)
    t0 = time.time()
    proc.send_signal(signal.SIGUSR1)
    out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 0 and time.time() - t0 < 10  # make was stopped, not waited for
    assert calls.read_text().splitlines() == ["make runs", "scontrol requeue 777"]
    assert "requeueing job 777" in out
