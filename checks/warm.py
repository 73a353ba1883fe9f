"""A grader kept warm between checks at a terminal, so that the second `make check` does not wait for torch.

On a GPU machine importing torch and Triton takes seconds, and every check used to pay it twice over (the
grader and its grading processes import them at the same time). At a terminal, `python -m checks N` now
hands its command line to a warm grader (`python -m checks.warm_server`): a process that imported
torch once, keeps its CUDA context, and has the grading processes of the next check already started and
waiting. It grades exactly as `python -m checks` would, writing to the same terminal, and hands back the
exit status. The first check starts it; it leaves after IDLE_S seconds without a check.

It never runs the learner's code (the grading processes do, one check each, as before). It is used only by a
person at a terminal: not for --json, not under CI, and not by `make grade` or `make solutions`, which grade in
their own processes, so that no submission can answer for another's check. CHECKS_WARM=0 turns it off;
CHECKS_WARM=1 uses it without a terminal too (`python -m bench latency`).

This module is the client side, standard library only: `python -m checks` imports it before torch. The messages
between the two are `WarmRequest` and `WarmReply`, JSON lines read through the one typed reader (`checks.typed_reader`);
READY and QUIT are single words.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from checks.typed_reader import RecordError, build  # standard library only, as this module
from checks.verdict import STOPPED

ROOT = Path(__file__).resolve().parent.parent
SWITCH = "CHECKS_WARM"
IDLE_S = 900.0  # a warm grader leaves after this long without a check
START_S = 180.0  # the longest the first check waits for a warm grader to be ready before grading itself
READY_S = 2.0  # how long a running warm grader may take to answer: longer means it is busy with another check
# Variables a shell changes between two commands, which do not change how a check runs.
SHELL_ONLY = frozenset({"_", "OLDPWD", "PWD", "SHLVL", "COLUMNS", "LINES"})
READY, QUIT = b"ready\n", b"quit\n"


@dataclass
class WarmRequest:
    """A check for the warm grader: `python -m checks ARGV` in the folder `cwd`, on the client's standard input, output
    and error (sent beside the message), written with `encoding`."""

    argv: list[str]
    cwd: str
    encoding: str = "utf-8"


@dataclass
class WarmReply:
    """The check's exit status, as `python -m checks` would have exited with."""

    status: int


def encode(message: WarmRequest | WarmReply) -> bytes:
    """A message as it goes on the socket: one JSON line."""
    return json.dumps(asdict(message)).encode() + b"\n"


def decode_request(data: bytes) -> WarmRequest:
    """The request in `data`; ValueError (no JSON) or RecordError (naming the field) when it is not one."""
    return build(WarmRequest, json.loads(data), "request")


def decode_reply(data: bytes) -> WarmReply:
    """The reply in `data`; ValueError (no JSON) or RecordError (naming the field) when it is not one."""
    return build(WarmReply, json.loads(data), "reply")


def wanted(argv: list[str], environ: dict[str, str] | os._Environ, at_terminal: bool) -> bool:
    """Whether this `python -m checks` should go through a warm grader."""
    switch = environ.get(SWITCH, "")
    if switch == "0" or "--json" in argv:
        return False
    return switch == "1" or (at_terminal and not environ.get("CI"))


def fingerprint(environ: dict[str, str] | os._Environ, root: Path = ROOT) -> str:
    """What a warm grader must share with this command: the Python, the grader's code, the environment.

    A warm grader with another fingerprint (the course was edited, another Python, a variable set) is not
    used; the grader started for this one tells it to leave.
    """
    digest = hashlib.sha256(f"{sys.executable}\0{root}\0".encode())
    for path in sorted([*(root / "checks").rglob("*.py"), root / "puzzles.yaml"]):
        stat = path.stat()
        digest.update(f"{path}:{stat.st_mtime_ns}:{stat.st_size}\0".encode())
    for key in sorted(set(environ) - SHELL_ONLY):
        digest.update(f"{key}={environ[key]}\0".encode())
    return digest.hexdigest()[:16]


def folder(create: bool = True) -> Path | None:
    """This user's folder for warm graders' sockets and logs (None when it is not safely this user's own,
    or, unless `create`, not there)."""
    path = Path(tempfile.gettempdir()) / f"checks-warm-{os.getuid()}"
    try:
        if create:
            path.mkdir(mode=0o700, exist_ok=True)
        stat = path.stat()
    except OSError:
        return None
    return path if stat.st_uid == os.getuid() and not stat.st_mode & 0o077 else None


def socket_path(base: Path, environ: dict[str, str] | os._Environ, root: Path = ROOT) -> Path:
    """The socket of the warm grader for this course folder and fingerprint: '<course>-<fingerprint>.sock'."""
    return base / f"{course_id(root)}-{fingerprint(environ, root)}.sock"


def course_id(root: Path = ROOT) -> str:
    """What names this course folder's warm graders, whatever their fingerprint."""
    return hashlib.sha256(str(root).encode()).hexdigest()[:8]


def connect(path: Path, wait: float = READY_S) -> socket.socket | None | bool:
    """A connection to the warm grader at `path` once it says it is ready; None when there is none (a stale
    socket is removed); False when it is busy with another check."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.settimeout(wait)
    try:
        conn.connect(str(path))
        ready = conn.recv(len(READY)) == READY
    except (FileNotFoundError, ConnectionRefusedError):
        conn.close()
        if path.exists():
            path.unlink(missing_ok=True)  # its grader is gone
        return None
    except (TimeoutError, OSError):
        conn.close()
        return False
    if not ready:
        conn.close()
        return None
    conn.settimeout(None)
    return conn


def held(path: Path) -> bool:
    """Whether a warm grader holds the lock of `path` (it holds it from its start to its end)."""
    with open(path.with_suffix(".lock"), "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        fcntl.flock(lock, fcntl.LOCK_UN)
        return False


def start(path: Path) -> socket.socket | None:
    """Start a warm grader for `path` and connect once it is ready (None if it could not start in time)."""
    with open(path.with_suffix(".log"), "ab") as log:
        server = subprocess.Popen(
            [sys.executable, "-m", "checks.warm_server", str(path)],
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a Ctrl-C at the terminal stops this check, not the warm grader
        )
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        if path.exists():
            conn = connect(path)
            if conn is not False:
                return conn or None
        if server.poll() is not None and not path.exists() and not held(path):
            return None  # it could not start (its log says why)
        time.sleep(0.05)
    return None


def _open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def request(argv: list[str]) -> int | None:
    """Have a warm grader (started here if needed) run `python -m checks argv`; its exit status, or None
    to grade in this process instead (none could be started, or it is busy)."""
    base = folder()
    if base is None or not all(_open(fd) for fd in (0, 1, 2)):
        return None  # no safe folder, or a standard stream is closed: nothing to hand over
    path = socket_path(base, os.environ)
    conn = connect(path) if path.exists() else None
    if conn is None:
        conn = start(path)
    if not conn:
        return None
    message = encode(WarmRequest(argv, os.getcwd(), sys.stdout.encoding or "utf-8"))
    with conn:
        try:
            socket.send_fds(conn, [message], [0, 1, 2])
            reply = b""
            while not reply.endswith(b"\n"):
                chunk = conn.recv(64)
                if not chunk:
                    break
                reply += chunk
        except KeyboardInterrupt:
            print(f"\n{STOPPED}", file=sys.stderr)
            return 130
        except OSError:
            reply = b""
    try:
        return decode_reply(reply).status
    except (ValueError, RecordError):
        print(
            "The warm grader stopped before its verdict; grading in this process instead "
            f"({SWITCH}=0 skips the warm grader).",
            file=sys.stderr,
        )
        return None


def running(root: Path = ROOT) -> list[Path]:
    """The sockets of this course's warm graders that are alive (they hold their lock), without disturbing them."""
    base = folder(create=False)
    if base is None:
        return []
    return [sock for sock in sorted(base.glob(f"{course_id(root)}-*.sock")) if held(sock)]


def stop(root: Path = ROOT, keep: Path | None = None) -> int:
    """Tell this course's idle warm graders (but the one at `keep`) to leave now; how many were told (a busy one
    leaves when idle)."""
    told = 0
    for sock in running(root):
        if sock != keep and (conn := connect(sock)):
            with conn:
                conn.sendall(QUIT)
            told += 1
    return told


if __name__ == "__main__":  # python -m checks.warm stop
    if sys.argv[1:] != ["stop"]:
        sys.exit("Usage: python -m checks.warm stop  (tells this course's warm graders to leave now)")
    print(f"Told {stop()} warm grader(s) to leave.")
