"""Run the grading process with a time limit and read its report as it comes, one checked event at a time."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from checks.engine.protocol import EXIT_COMMAND, Job, Stream
from checks.registry import ROOT

# Called with each accepted event; for "observed" it returns the command to send (time or exit).
OnEvent = Callable[[dict[str, Any]], str | None]


@dataclass
class ChildEnd:
    """How the grading process ended."""

    stream: Stream
    returncode: int | None  # None when it was killed at the time limit
    timed_out: bool
    seconds: float
    output: str  # the tail of what it printed


def _tail(path: Path, limit: int = 4000) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return text[-limit:]


class _Reader:
    """Reads whole lines appended to the events file since the last call."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset = path, 0

    def lines(self) -> list[str]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except OSError:
            return []
        complete = data[: data.rfind(b"\n") + 1]
        self.offset += len(complete)
        return [line for line in complete.decode("utf-8", errors="replace").splitlines() if line.strip()]


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


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    proc.wait()


def _write(proc: subprocess.Popen, line: str, close: bool = False) -> None:
    try:
        assert proc.stdin is not None
        proc.stdin.write((line + "\n").encode())
        proc.stdin.flush()
        if close:
            proc.stdin.close()
    except (BrokenPipeError, OSError):
        pass


def _send(proc: subprocess.Popen, command: str) -> None:
    _write(proc, command, close=True)


def child_env(interpret: bool) -> dict[str, str]:
    """The grading process's environment: the course on the path; on a GPU, autotuning results kept on disk.

    Triton keys a kept autotuning result by the kernel's source, its configs and the sizes, so a second
    check of unchanged code skips the benchmarking of every config (seconds at the timing size).
    """
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), PYTHONUNBUFFERED="1")
    if not interpret:
        env.setdefault("TRITON_CACHE_AUTOTUNING", "1")
    return env


def _start_child(workdir: Path, interpret: bool, preload: bool) -> subprocess.Popen:
    args = [str(workdir / "job.json"), str(workdir / "events.jsonl")]
    if preload:
        args += [PRELOAD_FLAG, "interpreter" if interpret else "gpu"]
    with open(workdir / "output.log", "ab") as log:
        return start_module("checks.engine.child", *args, env=child_env(interpret), stdout=log)


# Grading processes started before the grader imported torch, by (workdir, interpret).
_prestarted: dict[tuple[str, bool], subprocess.Popen] = {}
PRELOAD_FLAG = "--preload"


def prestart(workdir: Path, interpret: bool) -> None:
    """Start the grading process for `workdir` now: it imports torch and Triton while the grader does the same,
    then waits for its token and job. `run_child` for the same workdir and mode takes it over."""
    workdir.mkdir(parents=True, exist_ok=True)
    _prestarted[(str(workdir), interpret)] = _start_child(workdir, interpret, preload=True)


def discard_prestarted() -> None:
    """Stop every prestarted grading process that no stage took over (say, the submission could not be read)."""
    while _prestarted:
        _kill(_prestarted.popitem()[1])


def likely_gpu(interpret: bool) -> bool:
    """Whether this check will grade on a GPU, guessed before torch is imported (`grade` decides)."""
    if interpret or os.environ.get("TRITON_INTERPRET") == "1" or os.environ.get("CUDA_VISIBLE_DEVICES") == "":
        return False
    return Path("/dev/nvidiactl").exists() or Path("/dev/nvidia0").exists()


def prestart_for(workdir: Path, interpret: bool) -> None:
    """Start the grading processes `grade(..., workdir=workdir)` will use, before the grader imports torch.

    Both import torch and Triton while the grader does, which takes seconds on a GPU machine. A guess
    that turns out wrong costs nothing: `grade` starts the process it needs, and `discard_prestarted`
    stops the rest.
    """
    if likely_gpu(interpret):
        prestart(workdir, interpret=False)
        for part in range(part_count()):
            prestart(part_workdir(workdir, part), interpret=True)
    else:
        prestart(workdir, interpret=True)


PARTS_ENV = "CHECKS_INTERPRETER_PARTS"  # how many processes share the interpreter stage on a GPU machine
MAX_PARTS, CORES_PER_PART = 3, 4


def part_count() -> int:
    """Grading processes for the interpreter stage beside a GPU stage: one per 4 cores, at most 3, unless
    $CHECKS_INTERPRETER_PARTS says (the instructors' tools, which grade several submissions at once, set 1)."""
    chosen = os.environ.get(PARTS_ENV, "")
    if chosen.isdigit() and int(chosen) > 0:
        return int(chosen)
    return max(1, min(MAX_PARTS, (os.cpu_count() or 1) // CORES_PER_PART))


def part_workdir(workdir: Path, part: int) -> Path:
    """Where part `part` of the interpreter stage works (part 0 where the whole stage used to)."""
    return workdir / ("interpreter" if part == 0 else f"interpreter-{part}")


def _take_prestarted(workdir: Path, interpret: bool) -> subprocess.Popen | None:
    proc = _prestarted.pop((str(workdir), interpret), None)
    if proc is not None and proc.poll() is not None:  # it ended before its job came: start a fresh one
        proc.wait()
        return None
    return proc


def run_child(
    job: Job, stream: Stream, timeout: float, workdir: Path, on_event: OnEvent, stop: Callable[[], bool] | None = None
) -> ChildEnd:
    """Start `python -m checks.engine.child` (or take over the one prestarted for this workdir), feed its events
    through the protocol to on_event, and stop it at the limit."""
    job_path, events_path, log_path = workdir / "job.json", workdir / "events.jsonl", workdir / "output.log"
    job_path.write_text(job.to_json(), encoding="utf-8")
    proc = _take_prestarted(workdir, job.interpret) or _start_child(workdir, job.interpret, preload=False)
    stream.token = secrets.token_hex(16)
    _write(proc, stream.token)
    start = time.monotonic()
    timed_out = _follow(proc, _Reader(events_path), stream, timeout, on_event, stop)
    return ChildEnd(
        stream, None if timed_out else proc.returncode, timed_out, time.monotonic() - start, _tail(log_path)
    )


def _follow(
    proc: subprocess.Popen,
    reader: _Reader,
    stream: Stream,
    timeout: float,
    on_event: OnEvent,
    stop: Callable[[], bool] | None,
) -> bool:
    """Feed the grading process's events to on_event until it ends, is stopped or tampers; True at the time limit."""
    start = time.monotonic()
    commanded = False
    try:
        while True:
            done = proc.poll() is not None
            for line in reader.lines():
                event = stream.feed_line(line)
                if event is None:
                    break
                answer = on_event(event)
                if event["event"] == "observed" and not commanded:
                    commanded = True
                    stream.asked_time = answer is not None and answer != EXIT_COMMAND
                    _send(proc, answer or EXIT_COMMAND)
            if stream.tampered or (stop is not None and stop()):
                _kill(proc)
                return False
            if done:
                return False
            if time.monotonic() - start > timeout:
                _kill(proc)
                return True
            time.sleep(0.02)
    finally:
        if not commanded:
            _send(proc, EXIT_COMMAND)
