"""Start grading processes (`python -m checks.engine.grading_process.main`) and stop them, their own children included.

In the interpreter, with $CHECKS_FORK_SERVER set to 1, a grading process is forked from the fork server
(`checks.engine.processes.forking`) instead, where it can be; both kinds are handled alike."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from checks.engine.contract.protocol import PRELOAD_FLAG, RECORD
from checks.engine.processes import forking
from checks.engine.processes.forking import ForkedProcess
from checks.engine.processes.sealing import GRADER_PID, MARK, starting
from checks.registry import ROOT

GradingProcessHandle = subprocess.Popen | ForkedProcess  # a grading process, started here or forked by the fork server
started: list[GradingProcessHandle] = []  # every grading process this process started


def start_module(module: str, *args: str, env: dict[str, str], stdout: Any, text: bool = False) -> subprocess.Popen:
    """`python -m module args` from the repository root, in its own session (so that a kill takes its children too),
    stdin a pipe, stderr into stdout."""
    return subprocess.Popen(
        [sys.executable, "-m", module, *args],
        cwd=ROOT,
        env=env,
        stdout=stdout,
        stderr=subprocess.STDOUT if stdout is not subprocess.PIPE else None,
        stdin=subprocess.PIPE,
        text=text,
        start_new_session=True,
    )


def kill(proc: GradingProcessHandle) -> None:
    """Stop `proc` and every process of its session, and reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    proc.wait()


def grading_process_env(interpret: bool) -> dict[str, str]:
    """The grading process's environment: the course on the path; on a GPU, autotuning results kept on disk; in the
    interpreter, one CPU thread for numpy and torch.

    Triton keys a kept autotuning result by the kernel's source, its configs and the sizes, so a second
    check of unchanged code skips the benchmarking of every config (seconds at the timing size).
    The interpreter works on small blocks, where a pool of threads costs more than it saves, and on a GPU machine
    several interpreter processes run beside the GPU stage, each with a pool as large as the machine
    (measured in bench/results/check-latency-gpu.md).
    """
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), PYTHONUNBUFFERED="1")
    env[MARK] = "1"  # sealing: what a grading process leaves behind is found by this mark
    env[GRADER_PID] = str(os.getpid())  # sealing.end_with_parent: it ends with this process
    if interpret:
        for name in THREAD_VARIABLES:
            env.setdefault(name, "1")
    else:
        env.setdefault("TRITON_CACHE_AUTOTUNING", "1")
    return env


THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")  # read when numpy and torch load


def start_grading_process(
    workdir: Path, interpret: bool, preload: bool, role: str = RECORD, record_on_gpu: bool = False
) -> GradingProcessHandle:
    """A grading process for `workdir`; with `preload`, it imports torch and Triton (and for the recording `role`,
    what recording needs) before it waits for its job.

    In the interpreter, the fork server's (forked with torch and Triton imported) where it can be. With
    `record_on_gpu` (the interpreter stage beside a GPU stage), the recording process starts as the GPU stage's does:
    the same command line and environment, so that the learner's code records the same way in both stages.
    """
    if role == RECORD and record_on_gpu:
        interpret = False
    args: list[str] = []  # the check's folder comes with the job
    env = {**grading_process_env(interpret), "CHECKS_ROLE": f"{role}-{'interpreter' if interpret else 'gpu'}"}
    with open(workdir / "output.log", "ab") as log, starting:  # sealing: started and known at once
        proc = (
            forking.fork_grading_process([*args, PRELOAD_FLAG, "interpreter"], env, log.fileno()) if interpret else None
        )
        if proc is None:
            args += [PRELOAD_FLAG, "interpreter" if interpret else "gpu", role] if preload else []
            proc = start_module("checks.engine.grading_process.main", *args, env=env, stdout=log)
        started.append(proc)
    return proc


def start_map_recording(args: list[str], log_path: Path) -> GradingProcessHandle:
    """The process that records an access log for a map or the answer key's traffic
    (`python -m checks.engine.grading_process.recording ARGS`), started as every grading process is (forked by the fork
    server where it serves): in its own session, with the grading processes' environment, and known to the sealing
    while it runs."""
    env = grading_process_env(True)
    with open(log_path, "ab") as log, starting:
        proc = forking.fork_grading_process(args, env, log.fileno(), program="map") or start_module(
            "checks.engine.grading_process.recording", *args, env=env, stdout=log
        )
        started.append(proc)
    return proc


def forget(proc: GradingProcessHandle) -> None:
    """A process that has ended and been sealed: no longer one of this grader's."""
    with contextlib.suppress(ValueError):
        started.remove(proc)


def own_processes() -> set[int]:
    """The grading processes this process started and its fork server: none of them is left behind by another."""
    return {proc.pid for proc in started} | forking.server_pids()
