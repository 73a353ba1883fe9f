"""The fork server: a process that has imported what a grading process imports in Triton's interpreter (torch,
Triton, numpy, the grading process's own modules) and forks grading processes from itself, each in milliseconds
instead of the seconds those imports take.

Started by `checks.engine.processes.forking` as `python -m checks.engine.grading_process.fork_server FD`, with the
environment of an interpreter grading process (which carries the sealing mark) and FD its end of a socket pair
with the grader (SOCK_SEQPACKET: one message per send). It never loads a submission and runs no torch operation:
it stays one thread, so that a fork copies nothing half done (numpy's OpenBLAS stops its threads before each fork;
a first fork at start makes sure, and a server with another thread refuses to serve).

A request (`checks.engine.contract.messages.ForkRequest`: its number, the arguments, the environment and the program:
a grading process, or the recording of an access log for a map) comes with two file descriptors: the grading
process's standard input and its output log. The server forks; the grading process it forked starts a session of its
own (so that the grader's kill and its sealing treat it as a process it started itself), takes the descriptors as its
standard input, output and error, the request's environment and the repository as its folder, and runs
`checks.engine.grading_process.main` (a map's: `checks.engine.grading_process.recording`) as
`python -m checks.engine.grading_process.main ARGS` would, to the same exit. The server answers `Forked` (the pid),
or `Refused` (why) for a malformed request (the message names the field) or an environment other than its own (torch
and Triton read theirs at import: a grading process must have the one the server imported them with), and `Ended`
(the pid and its wait status) once that process is reaped; `Stopped` when it cannot serve at all.

It is a child subreaper: an orphan of a grading process comes back to it, where the grader's sealing
(`checks.engine.processes.sealing.left_behind`) finds and kills it; the server reaps it. It ends when the grader's
end of
the socket closes (the grader ended or was killed), and first kills every process of its own still running: the
grading processes nobody reads any more, and the orphans they left.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import os
import select
import signal
import socket
import sys
import threading
import traceback
from typing import NoReturn

from checks.engine.contract.messages import Answer, Ended, Forked, ForkRequest, Refused, Stopped, decode, encode
from checks.engine.processes import process_table
from checks.engine.processes.sealing import end_with_parent
from checks.typed_reader import RecordError

MAX_MESSAGE = 1 << 20
# What a grading process's environment may differ in from the server's: variables nothing reads at import. Pytest sets
# PYTEST_CURRENT_TEST for each test; the course's own settings (CHECKS_...) are read by the grader, and by the
# grading process only after it starts, from the request's environment it has by then.
PER_CALL = frozenset({"PYTEST_CURRENT_TEST"})
COURSE_SETTINGS = "CHECKS_"


def compared_environment(env: dict[str, str]) -> dict[str, str]:
    """The environment as the server compares it with a request's."""
    return {name: value for name, value in env.items() if name not in PER_CALL and not name.startswith(COURSE_SETTINGS)}


def send(sock: socket.socket, message: Answer) -> None:
    with contextlib.suppress(OSError):  # the grader is gone: the next receive says so
        sock.send(encode(message))


def import_for_grading() -> str:
    """Import what a grading process imports in the interpreter; why the server cannot serve, or ""."""
    from checks.engine.machine import detect
    from checks.engine.processes.sealing import adopt_orphans

    detect(force_interpreter=True)  # as a grading process started ahead of its check does (spawn's --preload)
    import checks.engine.grading_process.main
    import checks.engine.grading_process.recording
    import checks.engine.record.map_plan
    import checks.engine.replay.map_log  # the map's two parts, which its process imports when it runs
    from checks.engine.contract.protocol import RECORD, REPLAY
    from checks.engine.grading_process.main import import_for_role

    import_for_role(REPLAY)  # a forked replay reads nothing of the grader's from disk after its job
    import_for_role(RECORD)
    import checks.puzzles
    import checks.registry  # noqa: F401 - imported for the grading processes

    if not adopt_orphans():
        return "it could not become a child subreaper"
    return single_threaded()


def single_threaded() -> str:
    """Why this process must not fork grading processes, or "": it runs more than one thread, even after a fork.

    numpy's OpenBLAS stops its threads before a fork and starts them again only when it is next used: a first fork
    stops them for good, in a process that runs no torch or numpy operation.
    """
    first = os.fork()
    if first == 0:
        os._exit(0)
    os.waitpid(first, 0)
    threads = process_table.thread_count()
    if threads != 1 or threading.active_count() != 1:
        return f"it runs {threads} threads after its imports, and a fork copies only the one that forks"
    return ""


class Server:
    """The grading processes forked and not yet reaped, and the grader's socket."""

    def __init__(self, sock: socket.socket, env: dict[str, str]) -> None:
        self.sock, self.env = sock, compared_environment(env)
        self.pid = os.getpid()
        self.forked: set[int] = set()
        self.wakeup_read, self.wakeup_write = os.pipe()
        os.set_blocking(self.wakeup_write, False)

    def serve(self) -> tuple[str, list[str], dict[str, str], list[int]] | None:
        """Answer requests until the grader leaves (None); in a forked grading process, its request (program, args,
        env, fds)."""
        signal.set_wakeup_fd(self.wakeup_write)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so that a child's end wakes the select
        while True:
            ready, _, _ = select.select([self.sock, self.wakeup_read], [], [])
            if self.wakeup_read in ready:
                with contextlib.suppress(BlockingIOError):
                    os.read(self.wakeup_read, 4096)
            self.reap()
            if self.sock not in ready:
                continue
            data, fds, flags, _ = socket.recv_fds(self.sock, MAX_MESSAGE, 2)
            if not data:
                self.stop()
                return None
            try:
                if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
                    raise ValueError("a request longer than a message may be")
                request = decode(data, ForkRequest)
            except (ValueError, RecordError) as exc:  # answered, and the server serves on
                self.refuse(None, fds, f"a malformed request ({exc})")
                continue
            if len(fds) != 2:
                self.refuse(request.id, fds, "a request without its two file descriptors")
            elif compared_environment(request.env) != self.env:
                self.refuse(
                    request.id, fds, "an environment other than the one the server imported torch and Triton with"
                )
            elif (pid := os.fork()) == 0:
                end_with_parent(self.pid)  # the server's one thread: a grading process ends with the server
                self.leave()
                return request.program, request.args, request.env, fds
            else:
                self.forked.add(pid)
                for fd in fds:
                    os.close(fd)
                send(self.sock, Forked(request.id, pid))

    def refuse(self, request_id: int | None, fds: list[int], why: str) -> None:
        for fd in fds:
            os.close(fd)
        send(self.sock, Refused(request_id, why))

    def reap(self) -> None:
        """Reap every child that ended, the orphans it adopted included; report the grading processes'."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid in self.forked:
                self.forked.discard(pid)
                send(self.sock, Ended(pid, status))

    def stop(self) -> None:
        """The grader left: stop the grading processes nobody reads any more, and the orphans they left."""
        for pid in self.forked | process_table.children_of(os.getpid()):
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)

    def leave(self) -> None:
        """In a forked grading process: nothing of the server's stays (its socket, its signal handling)."""
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in (self.wakeup_read, self.wakeup_write):
            os.close(fd)
        self.sock.close()


def become(program: str, args: list[str], env: dict[str, str], fds: list[int]) -> None:
    """Make this forked grading process what `python -m checks.engine.grading_process.main ARGS` (`program` "map":
    `python -m checks.engine.grading_process.recording ARGS`) started with `env` would be."""
    from checks.engine.grading_process import main as grading_main
    from checks.engine.grading_process import recording
    from checks.registry import ROOT

    os.setsid()  # a session of its own, as spawn starts every grading process
    stdin, log = fds
    os.dup2(stdin, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(stdin)
    os.close(log)
    os.environ.clear()
    os.environ.update(env)
    os.chdir(ROOT)
    sys.argv = [(recording if program == "map" else grading_main).__file__, *args]


def end_as_python_does(code: int, interrupted: bool = False) -> NoReturn:
    """End this forked grading process as the interpreter ends a program, with exit status `code`: its threads
    (other than daemon ones) waited for, the atexit functions run, its output flushed, and an uncaught
    KeyboardInterrupt (`interrupted`) ended by SIGINT; but without tearing down the modules, which would write to,
    and so copy, every page the grading process still shares with the server (a third of a second)."""
    main_thread = threading.main_thread()
    while others := [t for t in threading.enumerate() if t is not main_thread and not t.daemon]:
        for thread in others:
            thread.join()
    atexit._run_exitfuncs()  # what the interpreter runs at its end
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    if interrupted:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit(code)


def exit_code(code: object) -> int:
    """The exit status Python gives `raise SystemExit(code)`; a code that is no integer is printed first."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def serve_until_forked(argv: list[str] | None = None) -> tuple[str, list[str]]:
    """Be the fork server until the grader leaves (then exit); in a forked grading process, ready to grade: its
    program ("grading" or "map") and its arguments."""
    args = sys.argv[1:] if argv is None else argv
    gc.disable()  # no collection leaves holes in the pages the grading processes share ...
    sock = socket.socket(fileno=int(args[0]))
    env = dict(os.environ)  # before the imports, which may add to it (detect sets TRITON_INTERPRET)
    try:
        problem = import_for_grading()
    except Exception:  # noqa: BLE001 - said to the grader, which starts its grading processes itself then
        problem = traceback.format_exc()
    if problem:
        send(sock, Stopped(problem))
        raise SystemExit(1)
    gc.freeze()  # ... and none in a grading process writes to the objects imported here
    request = Server(sock, env).serve()
    if request is None:
        raise SystemExit(0)
    gc.enable()
    become(*request)
    return request[0], sys.argv[1:]


if __name__ == "__main__":
    # The grading process's main is called here, at the top, so that the frames below it are as many as when
    # `python -m checks.engine.grading_process.main` runs it (a crash lists them in the learner's output).
    from checks.engine.grading_process.main import main as grade
    from checks.engine.grading_process.recording import main as record_for_a_map

    program, grading = serve_until_forked()
    try:
        end_as_python_does(exit_code((record_for_a_map if program == "map" else grade)(grading)))
    except SystemExit as exc:
        end_as_python_does(exit_code(exc.code))
    except BaseException as exc:  # noqa: BLE001 - reported and ended as Python ends a program on it
        sys.excepthook(type(exc), exc, exc.__traceback__)
        end_as_python_does(1, interrupted=isinstance(exc, KeyboardInterrupt))
