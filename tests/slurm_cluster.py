"""A real one-node SLURM cluster on this machine, for the `slurm` test tier (`make test-slurm`).

munged, slurmctld and slurmd of the Debian packages (slurm-wlm, munge) run as root against a
slurm.conf, gres.conf and munge key written in a temporary folder (SLURM_CONF points every client
there), on ports of their own, so a SLURM already installed on the machine is left alone. The node
is this host (`hostname -s`) with its real core count and 4 GPUs as gres backed by empty files, so
that the job script's `--gres=gpu:4` is accepted as on a GPU node. Every daemon started is stopped
by its pid when the module's tests end, passed or failed.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

import pytest

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "scontrol", "scancel", "sinfo", "squeue")
PARTITION = "test"
GPUS = 4


def unavailable() -> str | None:
    """Why no cluster can be started here (None if one can)."""
    if os.geteuid() != 0:
        return "the slurm tier starts munged, slurmctld and slurmd as root: run it as root"
    missing = [p for p in (*DAEMONS, *CLIENTS) if not _which(p)]
    if missing:
        return f"{', '.join(missing)} not installed: make slurm-deps (slurm-wlm, munge)"
    return None


def _which(prog: str) -> str | None:
    # munged and the SLURM daemons live in /usr/sbin, which a user's PATH may lack
    return shutil.which(prog) or shutil.which(prog, path="/usr/sbin:/sbin")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Cluster:
    """A started cluster: its folder, the environment its clients need, the daemons' pids."""

    root: Path
    node: str
    env: dict[str, str]
    pids: dict[str, int] = field(default_factory=dict)
    startup_s: float = 0.0

    def run(self, *cmd: str, check: bool = True, **kw) -> subprocess.CompletedProcess:
        """A SLURM client (scontrol, sbatch, scancel, ...) against this cluster."""
        kw.setdefault("env", self.env)
        got = subprocess.run(cmd, capture_output=True, text=True, timeout=60, **kw)
        if check and got.returncode != 0:
            raise AssertionError(f"{' '.join(cmd)}: rc {got.returncode}: {got.stderr.strip()}")
        return got

    def job(self, job_id: str) -> dict[str, str]:
        """`scontrol show job` of one job (or array task) as fields; {} once SLURM forgot it."""
        got = self.run("scontrol", "-o", "show", "job", job_id, check=False)
        if got.returncode != 0:
            return {}
        return dict(re.findall(r"(\w+(?::\w+)?)=(\S*)", got.stdout.splitlines()[0]))

    def jobs(self, job_id: str) -> list[dict[str, str]]:
        """Every record of a job: one per array task for an array's id."""
        got = self.run("scontrol", "-o", "show", "job", job_id, check=False)
        return [dict(re.findall(r"(\w+(?::\w+)?)=(\S*)", ln)) for ln in got.stdout.splitlines()]

    def wait(self, job_id: str, states: tuple[str, ...], timeout: float = 120) -> dict[str, str]:
        """Wait until the job's state is one of `states`; its record then."""
        deadline = time.monotonic() + timeout
        job: dict[str, str] = {}
        while time.monotonic() < deadline:
            job = self.job(job_id)
            if job.get("JobState") in states:
                return job
            time.sleep(0.5)
        raise AssertionError(f"job {job_id} not {'/'.join(states)} in {timeout} s: {job}")

    def node_state(self) -> str:
        got = self.run("sinfo", "-h", "-n", self.node, "-o", "%t", check=False)
        return got.stdout.strip()

    def settled(self, job_id: str, timeout: float = 120) -> None:
        """Wait until a requeued job can start again at once: the node has finished with its last
        attempt, and a credential issued now is newer than the one SLURM revoked to stop it.

        - A job released while a slurmstepd of its last attempt is left, or the node is still
          completing it, is refused by slurmd ("already running").
        - When SLURM stops an attempt it revokes the job's credentials issued up to that second,
          and slurmd takes a later credential for a new attempt only if it was made in a later
          second (credential times are whole seconds). A job released and scheduled within the
          second of the revocation is refused ("Job N already killed, do not launch batch job")
          and ends FAILED 1:0 without running its script. The revocation came before the node
          finished with the attempt, so it is over once the clock has left the second in which
          the node was seen settled. (SLURM's own hold of a requeued job, about 120 s, is what
          normally keeps the two apart.)"""
        deadline = time.monotonic() + timeout
        step = re.compile(rf"slurmstepd: \[{re.escape(job_id)}\.")
        while time.monotonic() < deadline:
            cmdlines = []
            for proc in Path("/proc").iterdir():
                with suppress(OSError):
                    if proc.name.isdigit():
                        cmdlines.append((proc / "cmdline").read_bytes().decode(errors="replace"))
            state = self.node_state()
            if not any(step.search(c) for c in cmdlines) and not state.startswith(
                ("comp", "mix", "alloc")
            ):
                second = int(time.time())
                while int(time.time()) <= second:
                    time.sleep(0.01)
                return
            time.sleep(0.2)
        raise AssertionError(
            f"job {job_id}'s last attempt still on node {self.node} after {timeout} s"
        )

    def log(self, name: str) -> str:
        path = self.root / "log" / name
        return path.read_text(errors="replace") if path.exists() else ""

    def trail(self, job_id: str) -> str:
        """What slurmctld and slurmd logged about a job: for a failed test's message."""
        pat = re.compile(rf"(JobId=|job |Job |StepId=|\[){re.escape(job_id)}\b")
        return "\n".join(
            f"{name}: {line}"
            for name in ("slurmctld.log", "slurmd.log")
            for line in self.log(name).splitlines()
            if pat.search(line)
        )

    def cancel_all(self, timeout: float = 180) -> None:
        """Cancel every job and wait until none runs: a job's processes belong to its slurmstepd,
        which outlives slurmd, so stopping the daemons alone would leave them running."""
        self.run("scancel", f"--partition={PARTITION}", check=False)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            busy = self.run("squeue", "-h", "-t", "CF,R,CG,SO,ST,S", "-o", "%i", check=False)
            if busy.returncode != 0 or not busy.stdout.strip():
                return
            time.sleep(0.5)

    def stop(self) -> None:
        """Cancel every job, then stop every daemon this cluster started, by its pid: TERM, then
        KILL after 10 s."""
        if "slurmctld" in self.pids and _alive(self.pids["slurmctld"]):
            self.cancel_all()
        for name in reversed(DAEMONS):
            pid = self.pids.pop(name, None)
            if pid is None:
                continue
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
            deadline = time.monotonic() + 10
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a stopped daemon is a zombie until its parent (init, as it daemonized) reaps it
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (OSError, IndexError):
        return False


def write_config(root: Path, node: str, cores: int) -> dict[str, Path]:
    """slurm.conf, gres.conf and the munge key in `root`; the paths the daemons are started with."""
    paths = {d: root / d for d in ("state", "spool", "log", "run", "munge", "gpu")}
    for p in paths.values():
        p.mkdir(parents=True, exist_ok=True)
    paths["munge"].chmod(0o700)
    for i in range(GPUS):
        (paths["gpu"] / f"gpu{i}").touch()
    key = paths["munge"] / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    socket_path = paths["munge"] / "munge.socket"
    log, run = paths["log"], paths["run"]
    conf = f"""\
ClusterName=artifact-test
SlurmctldHost={node}(127.0.0.1)
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={socket_path}
StateSaveLocation={paths["state"]}
SlurmdSpoolDir={paths["spool"]}
SlurmctldPidFile={run}/slurmctld.pid
SlurmdPidFile={run}/slurmd.pid
SlurmctldLogFile={log}/slurmctld.log
SlurmdLogFile={log}/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
ReturnToService=2
KillWait=30
MinJobAge=600
NodeName={node} NodeAddr=127.0.0.1 CPUs={cores} Gres=gpu:{GPUS} State=UNKNOWN
PartitionName={PARTITION} Nodes={node} Default=YES MaxTime=INFINITE OverSubscribe=YES State=UP
"""
    (root / "slurm.conf").write_text(conf)
    gpus = f"{paths['gpu']}/gpu[0-{GPUS - 1}]"
    (root / "gres.conf").write_text(f"AutoDetect=off\nNodeName={node} Name=gpu File={gpus}\n")
    return {**paths, "key": key, "socket": socket_path, "conf": root / "slurm.conf"}


def _start(cmd: list[str], pid_file: Path, env: dict[str, str], timeout: float = 30) -> int:
    """Start a daemon (it forks into the background) and return the pid it writes."""
    got = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    if got.returncode != 0:
        raise RuntimeError(f"{cmd[0]} failed (rc {got.returncode}): {got.stderr.strip()}")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = pid_file.read_text().strip() if pid_file.exists() else ""
        if text.isdigit() and _alive(int(text)):
            return int(text)
        time.sleep(0.05)
    raise RuntimeError(f"{cmd[0]} wrote no pid to {pid_file} in {timeout} s")


def start(root: Path, timeout: float = 60) -> Cluster:
    """Write the configuration, start munged, slurmctld and slurmd, and wait for an idle node."""
    t0 = time.monotonic()
    node = socket.gethostname().split(".")[0]
    paths = write_config(root, node, os.cpu_count() or 1)
    env = {**os.environ, "SLURM_CONF": str(paths["conf"])}
    for var in [v for v in env if v.startswith(("SLURM_", "SBATCH_", "SALLOC_", "SRUN_"))]:
        if var != "SLURM_CONF":  # a test run inside a SLURM job must not leak that job's settings
            del env[var]
    cluster = Cluster(root=root, node=node, env=env)
    run = paths["run"]
    try:
        cluster.pids["munged"] = _start(
            [_which("munged") or "munged", "--force", f"--key-file={paths['key']}",
             f"--socket={paths['socket']}", f"--pid-file={run}/munged.pid",
             f"--log-file={paths['log']}/munged.log", f"--seed-file={paths['munge']}/seed"],
            run / "munged.pid", env)  # fmt: skip
        cluster.pids["slurmctld"] = _start(
            [_which("slurmctld") or "slurmctld", "-c", "-i"], run / "slurmctld.pid", env
        )
        cluster.pids["slurmd"] = _start([_which("slurmd") or "slurmd"], run / "slurmd.pid", env)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if cluster.node_state() == "idle":
                cluster.startup_s = time.monotonic() - t0
                return cluster
            time.sleep(0.2)
        raise RuntimeError(
            f"node {node} not idle in {timeout} s ({cluster.node_state() or 'unknown'}); "
            f"slurmd.log: {cluster.log('slurmd.log')[-2000:]}"
        )
    except BaseException:
        cluster.stop()
        raise


@pytest.fixture(scope="module", name="cluster")
def cluster_fixture() -> Iterator[Cluster]:
    """`cluster`: a started one-node cluster for a module's tests (import this function into the
    module); stopped whatever the tests did."""
    why = unavailable()
    if why:
        pytest.skip(why)
    # slurmd and munged limit the length of their socket paths: a short folder of its own
    root = Path(tempfile.mkdtemp(prefix="slurm-", dir="/tmp"))
    try:
        cluster = start(root)
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    try:
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
