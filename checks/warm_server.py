"""`python -m checks.warm_server SOCKET`: the warm grader that `checks.warm` starts and talks to.

It holds the lock beside SOCKET from start to end (one warm grader per socket), starts the grading processes
of the first check, imports torch and Triton, tells the warm graders of other fingerprints of this course
to leave, and then serves one check at a time: the client sends its command line, folder and its standard
input, output and error; this process runs `checks.cli.main` on them exactly as `python -m checks` would and
sends back the exit status. The learner's code runs only in the grading processes, never here. If the
client goes away (Ctrl-C), the check's grading processes are stopped and the check is dropped. After each
check, the grading processes of the next one are started, and it leaves after IDLE_S seconds without one.
"""

from __future__ import annotations

import fcntl
import gc
import importlib
import io
import os
import signal
import socket
import sys
import threading
import traceback
from pathlib import Path
from typing import Any

from checks import cli
from checks.engine.processes import prestart
from checks.registry import RegistryError, report_broken_registry
from checks.typed_reader import RecordError
from checks.warm import IDLE_S, QUIT, READY, WarmReply, WarmRequest, decode_request, encode, stop

REQUEST_S = 10.0  # how long a client that connected may take to send its command


class _State:
    running = False  # a check is being graded: an interrupt from the watcher stops it
    leaving = False  # told to end (SIGTERM): once the check under way is stopped


def _on_interrupt(*_: Any) -> None:
    if _State.running:
        raise KeyboardInterrupt


def _on_terminate(*_: Any) -> None:
    _State.leaving = True
    if _State.running:
        prestart.stop_all()
        raise KeyboardInterrupt
    raise SystemExit(0)


class Watch(threading.Thread):
    """Stops the check when its client goes away (Ctrl-C at the terminal, a closed window): the socket closes."""

    def __init__(self, conn: socket.socket) -> None:
        super().__init__(daemon=True)
        self.conn, self.lock, self.active = conn, threading.Lock(), True

    def run(self) -> None:
        try:
            self.conn.recv(1)
        except OSError:
            pass
        with self.lock:
            if not self.active:
                return
            self.active = False
        prestart.stop_all()
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

    def finish(self) -> None:
        with self.lock:
            self.active = False


def _stream(fd: int, mode: str, encoding: str) -> io.TextIOWrapper:
    """A text stream on the client's descriptor, line by line as a terminal's is."""
    return io.TextIOWrapper(
        io.FileIO(fd, mode, closefd=False), encoding=encoding, errors="backslashreplace", line_buffering=True
    )


def run_check(request: WarmRequest, fds: list[int], conn: socket.socket) -> int:
    """`python -m checks` with the client's arguments, folder and standard streams; its exit status."""
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    saved, streams, here = [os.dup(n) for n in range(3)], (sys.stdin, sys.stdout, sys.stderr), os.getcwd()
    for n, fd in enumerate(fds):
        os.dup2(fd, n)
        os.close(fd)
    encoding = request.encoding or "utf-8"
    sys.stdin, sys.stdout, sys.stderr = (_stream(n, "r" if n == 0 else "w", encoding) for n in range(3))
    watch = Watch(conn)
    try:
        os.chdir(request.cwd)
        watch.start()
        _State.running = True
        status = cli.main(request.argv)
    except SystemExit as exc:  # argparse's usage errors, --help
        status = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 2
    except KeyboardInterrupt:
        status = 130
    except RegistryError as error:  # puzzles.yaml is broken: one line, as without a warm grader
        status = report_broken_registry(error)
    except BrokenPipeError:
        status = 1
    except Exception:  # noqa: BLE001 - the traceback goes to the learner's terminal, as without a warm grader
        traceback.print_exc()
        status = 1
    finally:
        _State.running = False
        watch.finish()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        sys.stdin, sys.stdout, sys.stderr = streams
        for n, fd in enumerate(saved):
            os.dup2(fd, n)
            os.close(fd)
        os.chdir(here)
    return status


def serve_one(conn: socket.socket) -> bool:
    """Answer one connection: a check, or the request to leave (False)."""
    conn.settimeout(REQUEST_S)
    try:
        conn.sendall(READY)
        data, fds, _, _ = socket.recv_fds(conn, 1 << 16, 3)
        while data and not data.endswith(b"\n"):
            data += conn.recv(1 << 16) or b"\n"
    except OSError:
        return True
    request = None
    if data != QUIT:
        try:
            if len(fds) != 3:
                raise ValueError(f"{len(fds)} file descriptors beside it, not the client's 3 standard streams")
            request = decode_request(data)
        except (ValueError, RecordError) as exc:  # not a client of this version: said in the log, and served on
            print(f"{os.getpid()} refused a message that is not a check: {exc}", flush=True)
    if request is None:
        for fd in fds:
            os.close(fd)
        return data != QUIT
    conn.settimeout(None)
    try:
        status = run_check(request, fds, conn)
    except KeyboardInterrupt:  # the client left as the check ended
        status = 130
    print(f"{os.getpid()} served {request.argv!r} -> {status}", flush=True)  # into the warm grader's log
    try:
        conn.sendall(encode(WarmReply(status)))
        conn.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    return True


def between_checks() -> None:
    """Tidy up after a check and start the grading processes of the next one."""
    prestart.stop_all()
    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.empty_cache()
    prestart.prestart_spare(interpret=False)


def serve(path: Path) -> int:
    """Serve checks on the socket `path` until IDLE_S seconds pass without one, or another grader retires it."""
    lock = open(path.with_suffix(".lock"), "a")  # held for the process's life
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return 0  # another warm grader serves this socket, or is starting to
    prestart.prestart_spare(interpret=False)  # they import torch while this process does
    grade = importlib.import_module("checks.engine.grade")  # torch and Triton, once for every check
    if prestart.likely_gpu(interpret=False) and grade.torch.cuda.is_available():
        grade.warm_up_cuda()  # the CUDA context too, kept for every check
    signal.signal(signal.SIGINT, _on_interrupt)
    signal.signal(signal.SIGTERM, _on_terminate)
    path.unlink(missing_ok=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(str(path))
        listener.listen(8)
        listener.settimeout(IDLE_S)
        stop(keep=path)  # this course's warm graders of other fingerprints
        while True:
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                return 0
            with conn:
                if not serve_one(conn) or _State.leaving:
                    return 0
            between_checks()
    finally:
        listener.close()
        path.unlink(missing_ok=True)
        prestart.drop_spare()
        prestart.stop_all()


if __name__ == "__main__":
    raise SystemExit(serve(Path(sys.argv[1])))
