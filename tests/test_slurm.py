"""The SLURM scripts, run for real with stand-ins for sbatch, scontrol and make on the PATH."""

from __future__ import annotations

import os
import shutil
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
    drop = ("PROFILE", "ARTIFACTS", "SIF", "BIND", "SBATCH_OPTS", "MAKEFLAGS", "MAKELEVEL")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    # no artifact.sif in the submit folder: the jobs use make (the clone's .venv)
    env.update(PATH=f"{bin_dir}:{env['PATH']}", SLURM_SUBMIT_DIR=str(tmp_path),
               SLURM_JOB_ID="777")  # fmt: skip
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


def _refused(env: dict[str, str], calls: Path, **given: str) -> str:
    """submit.sh with bad input: exit 2, one line on stderr, nothing submitted."""
    bad = subprocess.run(["/bin/bash", str(SUBMIT)], env={**env, **given}, cwd=REPO,
                         capture_output=True, text=True)  # fmt: skip
    assert bad.returncode == 2 and len(bad.stderr.splitlines()) == 1, bad.stderr
    assert not calls.exists() and bad.stdout == ""
    return bad.stderr.strip()


def test_bad_input_is_one_line_exit_2_and_nothing_submitted(fake_slurm, tmp_path):
    env, calls = fake_slurm
    for nodes in ("0", "abc", "-1", "2x"):
        want = f"error: NODES={nodes} must be a positive integer"
        assert _refused(env, calls, NODES=nodes) == want
    missing = tmp_path / "missing.sif"
    assert _refused(env, calls, NODES="2", SIF=str(missing)).startswith(
        f"error: SIF={missing} does not exist"
    )
    # through make too: make's check of every setting (run/settings.py) refuses it first, in
    # make's own form of one line, and nothing is submitted
    via_make = subprocess.run([shutil.which("make") or "make", "--no-print-directory", "slurm",
                               "NODES=abc"], env=env, cwd=REPO, capture_output=True, text=True)  # fmt: skip
    assert via_make.returncode == 2 and not calls.exists() and via_make.stdout == ""
    (line,) = via_make.stderr.splitlines()
    assert line.endswith("*** NODES must be a whole number >= 1, got 'abc'.  Stop."), line
    bogus = subprocess.run([shutil.which("make") or "make", "--no-print-directory", "slurm",
                            "ARTIFACTS=fig-vram fig-bogus"], env=env, cwd=REPO,
                           capture_output=True, text=True)  # fmt: skip
    assert bogus.returncode == 2 and not calls.exists()
    (line,) = bogus.stderr.splitlines()  # make's own form of one line: "Makefile:N: *** ..."
    assert line.endswith("*** ARTIFACTS: fig-bogus is no target of experiments/matrix.yaml (make "
                         "help lists them).  Stop.")  # fmt: skip
    empty = tmp_path / "empty-bin"  # bash runs submit.sh; no sbatch anywhere on the PATH
    empty.mkdir()
    got = _refused(env, calls, NODES="1", PATH=str(empty))
    assert got == "error: sbatch not found: submit from a SLURM login node"
    # an image that is there, or none asked for (artifact.sif absent), is submitted
    image = tmp_path / "artifact-test.sif"
    image.write_bytes(b"")
    for given in ({"SIF": str(image)}, {}):
        subprocess.run(["bash", str(SUBMIT)], env={**env, **given}, check=True, cwd=REPO)
        assert calls.read_text().splitlines() == ["sbatch run/slurm/artifact.sbatch all"]
        calls.unlink()


def test_sbatch_opts_go_to_every_sbatch_call_before_the_script_and_make_stays_out(fake_slurm):
    env, calls = fake_slurm
    (Path(env["PATH"].split(":")[0]) / "sbatch").write_text(
        f'#!/bin/bash\necho "sbatch $* MAKEFLAGS=${{MAKEFLAGS-unset}} ARTIFACTS=$ARTIFACTS"'
        f' >> "{calls}"\necho 4242\n'
    )
    opts = "--partition=gpu --account=proj1"
    # via the Makefile (the real make, not the stand-in), as the README says; make's own
    # variables (MAKEFLAGS: -j's jobserver) must not reach the jobs
    subprocess.run([shutil.which("make") or "make", "--no-print-directory", "-j2", "slurm", "NODES=2",
                    "ARTIFACTS=fig-vram table-noise", f"SBATCH_OPTS={opts}"],
                   env=env, check=True, cwd=REPO, capture_output=True)  # fmt: skip
    first, second = calls.read_text().splitlines()
    tail = "MAKEFLAGS=unset ARTIFACTS=fig-vram table-noise"
    assert first == f"sbatch --parsable --array=1-2 {opts} run/slurm/artifact.sbatch runs {tail}"
    assert second == (
        f"sbatch --dependency=afterany:4242 --job-name=mgpu-artifact-report {opts} "
        f"run/slurm/artifact.sbatch all {tail}"
    )


def test_the_profile_is_left_to_the_compute_node_unless_given(fake_slurm, tmp_path):
    env, calls = fake_slurm
    out = subprocess.run(["bash", str(SBATCH), "fig-vram"], env=env, capture_output=True,
                         text=True, check=True)  # fmt: skip
    assert calls.read_text().splitlines() == ["make fig-vram"]  # the node's Makefile decides
    assert "[slurm] job 777 on " in out.stdout
    calls.unlink()
    data = tmp_path / "llama"
    data.mkdir()
    env = {**env, "PROFILE": "quick", "LLAMA3_DIR": str(data), "MNIST_DIR": "/no/such/dir",
           "ARTIFACTS": "fig-vram table-noise"}  # fmt: skip
    out = subprocess.run(["bash", str(SBATCH)], env=env, capture_output=True, text=True,
                         check=True)  # fmt: skip
    assert calls.read_text().splitlines() == [
        "make PROFILE=quick ARTIFACTS=fig-vram table-noise all"
    ]
    assert "warning: /no/such/dir does not exist" in out.stderr
    calls.unlink()
    # an image named explicitly but not on the node (no shared file system): not the .venv
    gone = tmp_path / "gone.sif"
    bad = subprocess.run(["bash", str(SBATCH)], env={**env, "SIF": str(gone)},
                         capture_output=True, text=True)  # fmt: skip
    assert bad.returncode == 2 and not calls.exists()
    assert bad.stderr.strip().splitlines()[-1].startswith(f"error: SIF={gone} does not exist")


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


def test_the_slurm_tier_says_why_it_is_skipped(monkeypatch):
    import slurm_cluster  # tests/ is on sys.path (pytest rootdir)

    monkeypatch.setattr(slurm_cluster.os, "geteuid", lambda: 1000)
    assert "as root" in slurm_cluster.unavailable()
    monkeypatch.setattr(slurm_cluster.os, "geteuid", lambda: 0)
    monkeypatch.setattr(slurm_cluster, "_which", lambda p: None if p == "slurmctld" else p)
    assert slurm_cluster.unavailable().startswith("slurmctld not installed: make slurm-deps")
