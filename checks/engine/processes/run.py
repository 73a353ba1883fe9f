"""Run the grading process with a time limit and read its report as it comes, one checked event at a time."""

from __future__ import annotations

import secrets
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from checks.engine.processes.prestart import take_prestarted
from checks.engine.processes.spawn import kill, start_child
from checks.engine.protocol import EXIT_COMMAND, Job, Stream

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
    """Start `python -m checks.engine.child.main` (or take over the one prestarted for this workdir), feed its events
    through the protocol to on_event, and stop it at the limit."""
    job_path, events_path, log_path = workdir / "job.json", workdir / "events.jsonl", workdir / "output.log"
    job_path.write_text(job.to_json(), encoding="utf-8")
    proc = take_prestarted(workdir, job.interpret) or start_child(workdir, job.interpret, preload=False)
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
                kill(proc)
                return False
            if done:
                return False
            if time.monotonic() - start > timeout:
                kill(proc)
                return True
            time.sleep(0.02)
    finally:
        if not commanded:
            _send(proc, EXIT_COMMAND)
