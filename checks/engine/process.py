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


def run_child(
    job: Job, stream: Stream, timeout: float, workdir: Path, on_event: OnEvent, stop: Callable[[], bool] | None = None
) -> ChildEnd:
    """Start `python -m checks.engine.child`, feed its events through the protocol to on_event, stop it at the limit."""
    job_path, events_path, log_path = workdir / "job.json", workdir / "events.jsonl", workdir / "output.log"
    job_path.write_text(job.to_json(), encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), PYTHONUNBUFFERED="1")
    reader = _Reader(events_path)
    start = time.monotonic()
    timed_out, commanded = False, False
    with open(log_path, "wb") as log:
        proc = start_module("checks.engine.child", str(job_path), str(events_path), env=env, stdout=log)
        stream.token = secrets.token_hex(16)
        _write(proc, stream.token)
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
            if stream.tampered:
                _kill(proc)
                break
            if done:
                break
            if stop is not None and stop():
                _kill(proc)
                break
            if time.monotonic() - start > timeout:
                _kill(proc)
                timed_out = True
                break
            time.sleep(0.02)
    if not commanded:
        _send(proc, EXIT_COMMAND)
    return ChildEnd(
        stream, None if timed_out else proc.returncode, timed_out, time.monotonic() - start, _tail(log_path)
    )
