"""Run the grading process with a time limit and read its report as it comes, one checked event at a time.

The grader loops over `GradingProcess.events()` and judges each event as it comes (`checks.engine.judging.stage`);
`end()` then kills whatever the process started that outlived it (`checks.engine.processes.sealing.left_behind`), which
makes the report tampered with.
"""

from __future__ import annotations

import secrets
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from checks.engine.contract.protocol import EXIT_COMMAND, RECORD, Event, Job, Observed, RecordStream, Stream
from checks.engine.processes import process_table
from checks.engine.processes.forking import server_pids
from checks.engine.processes.prestart import take_prestarted
from checks.engine.processes.sealing import adopt_orphans, grader_digest, left_behind
from checks.engine.processes.spawn import GradingProcessHandle, kill, own_processes, start_grading_process


@dataclass
class ProcessEnd:
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


def _write(proc: GradingProcessHandle, line: str, close: bool = False) -> None:
    try:
        assert proc.stdin is not None
        proc.stdin.write((line + "\n").encode())
        proc.stdin.flush()
        if close:
            proc.stdin.close()
    except (BrokenPipeError, OSError):
        pass


def _send(proc: GradingProcessHandle, command: str) -> None:
    _write(proc, command, close=True)


_digests: dict[str, str] = {}  # the check's folder -> the digest of the grader's files taken before its recording ran


def _digest(role: str, workdir: Path) -> str:
    """The digest of the grader's files (sealing.grader_digest) for a job: taken as the recording starts, and the same
    one handed to the replay that follows it in the folder (which compares it with its own before it performs)."""
    if role == RECORD:
        _digests[str(workdir)] = grader_digest()
        return _digests[str(workdir)]
    return _digests.pop(str(workdir), "") or grader_digest()


class GradingProcess:
    """One grading process for one job: started (or taken over from `prestart`), its checked events read as they
    come (`events()`), answered once when it has observed everything (`answer()`), then how it ended (`end()`)."""

    def __init__(
        self,
        job: Job,
        stream: Stream | RecordStream,
        timeout: float,
        workdir: Path,
        stop: Callable[[], bool] | None = None,
        proc: GradingProcessHandle | None = None,
    ) -> None:
        """Start `python -m checks.engine.grading_process.main` (or take over `proc`, or the one prestarted for this
        workdir)."""
        self.stream, self.timeout, self.stop = stream, timeout, stop
        self.log_path = workdir / "output.log"
        events = workdir / f"events-{job.role}.jsonl"
        events.unlink(missing_ok=True)  # whatever an earlier process left there is not this one's report
        adopt_orphans()  # sealing: an orphan of the grading process comes back to this process, to be found
        if proc is None:
            proc = take_prestarted(workdir, job.interpret) or start_grading_process(
                workdir, job.interpret, preload=False, record_on_gpu=job.record_on_gpu
            )
        self.proc = proc
        entry = process_table.lookup(proc.pid)  # its start: an orphan started since then is one of its own
        self.started = entry.started if entry is not None else None
        self.reader = _Reader(events)
        stream.token = secrets.token_hex(16)
        # a recording process writes only in a folder of its own, made here, removed when it has ended
        self.scratch = tempfile.mkdtemp(prefix="checks-") if job.role == RECORD else ""
        job = replace(job, workdir=str(workdir), scratch=self.scratch, grader_digest=_digest(job.role, workdir))
        _write(self.proc, stream.token)
        _write(self.proc, job.to_json())  # the job goes over the pipe only this process holds
        self.start = time.monotonic()
        self.timed_out = False
        self.commanded = False

    def events(self) -> Iterator[Event]:
        """Each event that keeps the protocol, in order, until the process ends, is stopped, tampers or runs out
        of time (then it is killed)."""
        try:
            while True:
                done = self.proc.poll() is not None
                for line in self.reader.lines():
                    event = self.stream.feed_line(line)
                    if event is None:
                        break
                    yield event
                    if isinstance(event, Observed) and not self.commanded:
                        self.answer(None)
                if self.stream.tampered or (self.stop is not None and self.stop()):
                    kill(self.proc)
                    return
                if done:
                    return
                if time.monotonic() - self.start > self.timeout:
                    kill(self.proc)
                    self.timed_out = True
                    return
                time.sleep(0.02)
        finally:
            if not self.commanded:
                _send(self.proc, EXIT_COMMAND)

    def answer(self, command: str | None) -> None:
        """The grader's one answer to `observed`: time the submission (TIME_COMMAND) or exit (None)."""
        if self.commanded:
            return
        self.commanded = True
        self.stream.asked_time = command is not None and command != EXIT_COMMAND
        _send(self.proc, command or EXIT_COMMAND)

    def end(self) -> ProcessEnd:
        """How it ended; a process it started that outlived it (killed now) makes the report tampered with."""
        if self.proc.poll() is None:  # events() was left before the process ended
            kill(self.proc)
        left = left_behind(self.proc.pid, own_processes, server_pids(), self.started)  # sealing: nothing outlives it
        if self.scratch:
            shutil.rmtree(self.scratch, ignore_errors=True)
        if left and not self.stream.tampered:
            self.stream.tampered = f"{left[0]}, started by your code, outlived the grading process"
        returncode = None if self.timed_out else self.proc.returncode
        seconds = time.monotonic() - self.start
        return ProcessEnd(self.stream, returncode, self.timed_out, seconds, _tail(self.log_path))
