"""Grading processes forked from a fork server, on a CPU, when $CHECKS_FORK_SERVER is 1 (the test suite sets it).

A grading process spends seconds importing torch, Triton and numpy before it does anything. The fork server
(`checks.engine.grading_process.fork_server`, in a process of its own) has imported them once, with the environment of
an interpreter grading process, and forks each grading process from itself. `spawn.start_grading_process` asks it first;
`fork_grading_process` answers None, and spawn starts the process itself as always, when the server is off, on a machine
with an NVIDIA GPU (fork and CUDA do not mix), when the server could not start or has died, and when the request's
environment is not the one the server imported torch and Triton with.

The server starts on the first request (that request waits for its imports), once per grader process, and talks
over a socket pair whose other end only the server holds: nothing else, a grading process included, can ask it
for a process. It ends when this process ends or closes its end (`stop_server`, at exit). A forked grading process
is handled like a subprocess.Popen (`ForkedProcess`): `checks.engine.processes.run`, `spawn.kill` and `prestart`
treat both alike. It is in a session of its own, and an orphan it leaves comes back to the server, a child
subreaper like the grader, where `left_behind` (`checks.engine.processes.sealing`) looks for it.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, NoReturn

from checks.engine.contract.messages import Answer, Ended, Forked, ForkRequest, Refused, Stopped, decode, encode
from checks.engine.processes import process_table
from checks.registry import ROOT
from checks.typed_reader import RecordError

ENV = "CHECKS_FORK_SERVER"  # "1": fork interpreter grading processes from a fork server
SERVER_MODULE = "checks.engine.grading_process.fork_server"
MAX_MESSAGE = 1 << 16
START_LIMIT = 300.0  # seconds the first request waits for the server's imports (a busy machine: many times 3 s)


def wanted() -> bool:
    """Whether grading processes in the interpreter come from the fork server: $CHECKS_FORK_SERVER is 1, on Linux,
    on a machine without an NVIDIA GPU."""
    if os.environ.get(ENV) != "1" or not sys.platform.startswith("linux"):
        return False
    return not (Path("/dev/nvidiactl").exists() or Path("/dev/nvidia0").exists())


class ServerGone(Exception):
    """The fork server ended, or could not serve."""


class ForkServerClient:
    """The grader's side of the fork server: its process, the socket pair, and what it said of each grading process
    it forked."""

    def __init__(self, env: dict[str, str]) -> None:
        """Start `python -m checks.engine.grading_process.fork_server` with `env` (it imports while the first request
        waits)."""
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with theirs:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", SERVER_MODULE, str(theirs.fileno())],
                cwd=ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                pass_fds=[theirs.fileno()],
                start_new_session=True,
            )
        self.lock = threading.Lock()  # one reader of the socket at a time
        self.ended: dict[int, int] = {}  # pid -> wait status, for grading processes not yet asked about
        self.requests = 0  # requests sent, each answered with its number
        self.problem = ""  # why it no longer serves

    def fork(self, args: list[str], env: dict[str, str], stdin: int, log: int, program: str = "grading") -> int:
        """The pid of a grading process (`program`: "grading" or "map") forked with these arguments and environment,
        `stdin` and `log` as its standard input and output; ServerGone when the server cannot fork it."""
        with self.lock:
            if self.problem:
                raise ServerGone(self.problem)
            self.requests += 1
            request = encode(ForkRequest(self.requests, args, env, program))  # type: ignore[arg-type]
            try:
                socket.send_fds(self.sock, [request], [stdin, log])
            except OSError as exc:
                self.gone(f"it could not be reached ({exc})")
            deadline = time.monotonic() + START_LIMIT
            while True:
                message = self.next_message(deadline - time.monotonic())
                if message is None:
                    self.gone(f"it did not answer in {START_LIMIT:g} s")
                elif isinstance(message, Forked):
                    # the pid is a new process's now: an earlier one's status nobody asked for is not its own
                    self.ended.pop(message.pid, None)
                    if message.id == self.requests:
                        return message.pid
                    with contextlib.suppress(OSError):  # the answer to a request given up on (interrupted)
                        os.kill(message.pid, signal.SIGKILL)
                elif isinstance(message, Refused) and message.id in (self.requests, None):  # None: it was malformed
                    raise ServerGone(message.why)

    def next_message(self, timeout: float) -> Answer | None:
        """The server's next message, or None when none came in `timeout` seconds; an ended grading process's is kept in
        `ended`. ServerGone when the server ended or stopped. The caller holds `lock`."""
        if not select.select([self.sock], [], [], max(0.0, timeout))[0]:
            return None
        try:
            data = self.sock.recv(MAX_MESSAGE)
        except OSError as exc:
            self.gone(f"its socket failed ({exc})")
        if not data:
            self.gone("it ended")
        try:
            message = decode(data, Forked, Refused, Ended, Stopped)
        except (ValueError, RecordError) as exc:
            self.gone(f"it sent a malformed message ({exc})")
        if isinstance(message, Stopped):
            self.gone(f"it could not serve: {message.why}")
        if isinstance(message, Ended):
            self.ended[message.pid] = message.status
        return message

    def gone(self, why: str) -> NoReturn:
        """It no longer serves: stop it, and say why (ServerGone)."""
        if not self.problem:
            self.problem = why
            self.sock.close()
            with contextlib.suppress(OSError):
                self.proc.kill()
        raise ServerGone(why)

    def status(self, pid: int) -> int | None:
        """The wait status of the grading process `pid` once it ended and was reaped, else None."""
        with self.lock:
            with contextlib.suppress(ServerGone):
                while pid not in self.ended and not self.problem and self.next_message(0) is not None:
                    pass
            return self.ended.pop(pid, None)

    def stop(self) -> None:
        """Close the socket: the server stops the grading processes still running, and ends."""
        with self.lock:
            if not self.problem:
                self.problem = "it was stopped"
                self.sock.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class ForkedProcess:
    """A grading process the fork server forked, with what the grader uses of a subprocess.Popen."""

    def __init__(self, server: ForkServerClient, pid: int, stdin: IO[bytes]) -> None:
        self.server, self.pid, self.stdin = server, pid, stdin
        self.returncode: int | None = None

    def poll(self) -> int | None:
        """Its exit code once it ended (minus the signal that ended it), else None."""
        if self.returncode is None:
            status = self.server.status(self.pid)
            if status is not None:
                self.returncode = os.waitstatus_to_exitcode(status)
            elif self.server.problem:
                self.returncode = _orphan_exit(self.pid)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired([SERVER_MODULE, str(self.pid)], timeout or 0)
            try:
                select.select([self.server.sock], [], [], 0.05)  # until the server says something
            except (OSError, ValueError):  # its socket is closed: poll finds out how the grading process ended
                time.sleep(0.05)
        return code

    def kill(self) -> None:
        if self.poll() is None:
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGKILL)


def _orphan_exit(pid: int) -> int | None:
    """How a grading process of a server that died ended: this process reaps it when it adopted it (a subreaper),
    else it is known only to have ended (as if killed)."""
    try:
        done, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        process = process_table.lookup(pid)
        return -signal.SIGKILL if process is None or process.ended else None
    return os.waitstatus_to_exitcode(status) if done else None


_server: list[ForkServerClient] = []  # the one server of this process, once started
_starting = threading.Lock()


def fork_grading_process(
    args: list[str], env: dict[str, str], log: int, program: str = "grading"
) -> ForkedProcess | None:
    """A grading process `python -m checks.engine.grading_process.main ARGS` (`program` "map":
    `python -m checks.engine.grading_process.recording ARGS`) forked by the fork server, with `env` and `log` as its
    output; None when it cannot be (see the module's docstring): the caller starts one itself."""
    if not wanted():
        return None
    with _starting:
        if not _server:
            _server.append(ForkServerClient(env))
    server = _server[0]
    read, write = os.pipe()
    try:
        pid = server.fork(args, env, read, log, program)
    except BaseException as exc:
        os.close(write)
        if isinstance(exc, ServerGone):
            return None
        raise
    finally:
        os.close(read)
    return ForkedProcess(server, pid, open(write, "wb"))


def server_pids() -> set[int]:
    """The fork server's pid, while it runs: a process of this grader's, and an adopter of orphans."""
    return {_server[0].proc.pid} if _server and _server[0].proc.poll() is None else set()


@atexit.register
def stop_server() -> None:
    """End the fork server (this process is ending, or a test starts afresh)."""
    while _server:
        _server.pop().stop()
