"""A single-node Slurm cluster for the tests: munged, slurmctld and slurmd from Debian's packages, started in a
temporary folder with their own key, socket, ports and state, and stopped (and the folder removed) at the end.

`.ci/run` installs the packages (slurmctld, slurmd, slurm-client, munge); `unavailable()` says why a cluster
cannot be started on this machine, or None when it can.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

DAEMONS = ("munged", "mungekey", "slurmctld", "slurmd", "sbatch", "squeue", "sinfo", "scancel")
SBIN = ("/usr/sbin", "/usr/bin", "/sbin", "/bin")


def which(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path=os.pathsep.join(SBIN))


def unavailable() -> str | None:
    """Why a cluster cannot be started here, or None."""
    missing = [name for name in DAEMONS if which(name) is None]
    if missing:
        packages = "slurmctld slurmd slurm-client munge"
        return f"Slurm is not installed ({', '.join(missing)} missing): apt-get install {packages}"
    if os.geteuid() != 0:
        return "slurmd must run as root to start jobs; run the Slurm test as root (as CI does)"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(condition, seconds: float, what: str, logs: list[Path]) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.5)
    tails = "\n".join(f"--- {log}:\n{log.read_text()[-3000:]}" for log in logs if log.exists())
    raise RuntimeError(f"{what} did not happen within {seconds:g} s.\n{tails}")


@contextlib.contextmanager
def cluster(cpus: int = 2) -> Iterator[dict[str, str]]:
    """Start munged, slurmctld and slurmd; yield the environment the Slurm commands need (SLURM_CONF)."""
    base = Path(tempfile.mkdtemp(prefix="course-slurm-"))
    base.chmod(0o755)
    node = socket.gethostname().split(".")[0]
    daemons: list[subprocess.Popen] = []
    try:
        for name in ("munge", "state", "spool", "log", "run"):
            (base / name).mkdir()
        key, munge_socket = base / "munge" / "munge.key", base / "munge" / "munge.socket"
        subprocess.run([which("mungekey"), "--create", "--keyfile", str(key)], check=True, capture_output=True)
        key.chmod(0o600)
        (base / "munge").chmod(0o700)
        daemons.append(
            subprocess.Popen(
                [
                    which("munged"),
                    "--foreground",
                    "--force",
                    f"--key-file={key}",
                    f"--socket={munge_socket}",
                    f"--pid-file={base / 'run' / 'munged.pid'}",
                    f"--log-file={base / 'log' / 'munged.log'}",
                    f"--seed-file={base / 'munge' / 'munged.seed'}",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.STDOUT,
            )
        )
        _wait(munge_socket.exists, 20, "munged's socket", [base / "log" / "munged.log"])
        conf = base / "slurm.conf"
        conf.write_text(
            "\n".join(
                [
                    "ClusterName=course",
                    f"SlurmctldHost={node}(127.0.0.1)",
                    f"SlurmctldPort={free_port()}",
                    f"SlurmdPort={free_port()}",
                    "SlurmUser=root",
                    "SlurmdUser=root",
                    "AuthType=auth/munge",
                    "CredType=cred/munge",
                    f"AuthInfo=socket={munge_socket}",
                    f"StateSaveLocation={base / 'state'}",
                    f"SlurmdSpoolDir={base / 'spool'}",
                    f"SlurmctldPidFile={base / 'run' / 'slurmctld.pid'}",
                    f"SlurmdPidFile={base / 'run' / 'slurmd.pid'}",
                    f"SlurmctldLogFile={base / 'log' / 'slurmctld.log'}",
                    f"SlurmdLogFile={base / 'log' / 'slurmd.log'}",
                    "ProctrackType=proctrack/linuxproc",
                    "TaskPlugin=task/none",
                    "JobAcctGatherType=jobacct_gather/none",
                    "AccountingStorageType=accounting_storage/none",
                    "SelectType=select/cons_tres",
                    "SelectTypeParameters=CR_CPU",
                    "MpiDefault=none",
                    "ReturnToService=2",
                    "SchedulerType=sched/backfill",
                    "SchedulerParameters=sched_interval=1,bf_interval=1",
                    f"NodeName={node} NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN",
                    "PartitionName=course Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
                    "",
                ]
            ),
            encoding="utf-8",
        )
        env = os.environ | {"SLURM_CONF": str(conf)}
        for daemon in ("slurmctld", "slurmd"):
            command = [which(daemon), "-D", "-f", str(conf)] + (["-i"] if daemon == "slurmctld" else [])
            log = open(base / "log" / f"{daemon}.out", "w")
            daemons.append(subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT))
        logs = [base / "log" / name for name in ("slurmctld.log", "slurmd.log", "slurmctld.out", "slurmd.out")]

        def idle() -> bool:
            done = subprocess.run(["sinfo", "-h", "-o", "%t"], env=env, capture_output=True, text=True, check=False)
            return done.stdout.strip() == "idle"

        _wait(idle, 60, "the node coming up idle", logs)
        yield env
    finally:
        if len(daemons) == 3:  # jobs left behind by a failed test are cancelled before the daemons stop
            cancel = [which("scancel") or "scancel", "--full", "--user", str(os.geteuid())]
            subprocess.run(cancel, env=env, capture_output=True, check=False)
        for daemon in reversed(daemons):
            daemon.send_signal(signal.SIGTERM)
        for daemon in reversed(daemons):
            try:
                daemon.wait(timeout=20)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait()
        shutil.rmtree(base, ignore_errors=True)
