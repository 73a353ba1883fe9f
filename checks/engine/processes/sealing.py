"""No process left behind: before the replay starts, nothing the learner's code started is still running.

Before any result counts, every process the grading process started must be gone: `left_behind` lists the
processes of its session and process group, and (the grader being a child subreaper on Linux, so that an
orphan comes back to it however it detached: a new session, a double fork, an emptied environment) every
orphan it adopted that is none of its own grading processes and started after the grading process did (or
carries the grading processes' mark in its environment), with everything that descends from those; it kills
them all, again until none is left. A grading process forked by the fork server
(`checks.engine.processes.forking`) leaves its orphans to the server, a child subreaper too: those are
looked for there. `checks.engine.processes.run` calls it once the grading process ended or was killed. A
process that outlived the grading process is tampering.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Collection
from pathlib import Path

from checks.engine.processes import process_table
from checks.registry import ROOT

PR_SET_CHILD_SUBREAPER = 36
MARK = "CHECKS_GRADING_PROCESS"  # in the environment of every grading process, and so of all it starts
GRACE = 0.3  # seconds a process of the session may take to exit after the grading process did
# Held while a grading process is started and while `left_behind` looks at the processes, so that one being
# started in another thread (the parts of an interpreter stage, a class graded several at a time) is never taken
# for a survivor: it is either started and known, or not started yet.
starting = threading.Lock()


_subreaper: list[bool] = []


def adopt_orphans() -> bool:
    """Make this process a child subreaper (Linux), once: orphans of its grading processes become its children."""
    if not _subreaper:
        done = False
        if sys.platform.startswith("linux"):
            with contextlib.suppress(Exception):
                import ctypes

                done = ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
        _subreaper.append(done)
    return _subreaper[0]


PR_SET_PDEATHSIG = 1
GRADER_PID = "CHECKS_GRADER_PID"  # in a grading process's environment: the process that started it


def end_with_parent(parent: int | None = None) -> bool:
    """End this process (SIGKILL) when the thread that started it ends, however it ends (SIGKILL included): a grading
    process never outlives its grader. `parent`: the pid it was started by (default: $CHECKS_GRADER_PID); a parent
    already gone ends it now. True when the kernel will do it (Linux)."""
    if parent is None:
        named = os.environ.get(GRADER_PID, "")
        parent = int(named) if named.isdigit() else None
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        done = ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False
    if parent is not None and os.getppid() != parent:  # it died before the signal was asked for
        os._exit(1)
    return done


def _marked(pid: int) -> bool:
    """Whether the process started with the grading processes' mark in its environment (it descends from one)."""
    return f"{MARK}=1" in process_table.environment(pid)


def _alive(
    session: int, known: Callable[[], Collection[int]], adopters: Collection[int], since: int | None
) -> list[int]:
    me = os.getpid()
    with starting:
        found, mine = process_table.processes(), known()
    alive: list[int] = []
    for process in found:
        if process.ended or process.pid == me or process.pid in mine:
            continue
        adopted = process.parent == me or process.parent in adopters
        # an orphan that came back to this process: started since the grading process was, or marked as its
        orphan = adopted and ((since is not None and process.started >= since) or _marked(process.pid))
        if process.group == session or process.session == session or orphan:
            alive.append(process.pid)
    children: dict[int, list[int]] = {}
    for process in found:
        children.setdefault(process.parent, []).append(process.pid)
    stack = list(alive)
    while stack:  # and all that descends from them, wherever it moved
        for child in children.get(stack.pop(), []):
            if child not in alive and child != me and child not in mine:
                alive.append(child)
                stack.append(child)
    return alive


def _describe(pid: int) -> str:
    command = process_table.command_line(pid)
    return f"process {pid}" if command is None else f"process {pid} ({command[:80]})"


def left_behind(
    session: int,
    known: Collection[int] | Callable[[], Collection[int]],
    adopters: Collection[int] = (),
    since: int | None = None,
) -> list[str]:
    """The processes of a grading process's session (its id is `session`) still alive after it ended, and the
    orphans this process or one of `adopters` (the fork server, a subreaper too) adopted that are none of its own
    `known` children (the grading processes it started, asked for while `starting` is held when a callable) and
    started at or after `since` (the grading process's start, `process_table.ProcessEntry.started`), with their
    descendants; each is killed and reaped (an adopter reaps its own), until none is left."""
    mine = known if callable(known) else lambda: known
    alive = _alive(session, mine, adopters, since)
    if alive:
        time.sleep(GRACE)  # a process on its way out is not a survivor
        alive = _alive(session, mine, adopters, since)
    described: list[str] = []
    rounds = 0
    while alive and rounds < 50:  # a process that forks as it is killed: its children come back here too
        described += [_describe(pid) for pid in alive if len(described) < 20]
        for pid in alive:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.killpg(session, signal.SIGKILL)
        for pid in alive:
            with contextlib.suppress(OSError, ChildProcessError):
                os.waitpid(pid, 0)  # an adopted orphan is this process's child now
        rounds += 1
        alive = _alive(session, mine, adopters, since)
    return described


def grader_digest(root: Path = ROOT) -> str:
    """A digest of the grader's files, by name and content: every file under checks/ and solutions/ (the answer keys,
    which the replay may record) but Python's bytecode caches, and puzzles.yaml. The grader takes it before a
    recording runs, and the replay compares it before it performs: a file the recording wrote into the grader's tree
    (by any writer, where the kernel could not seal the recording process) stops the grading (30-40 ms)."""
    digest = hashlib.sha256()
    found = [*(root / "checks").rglob("*"), *(root / "solutions").rglob("*")]
    files = sorted(p for p in found if "__pycache__" not in p.parts and not p.is_dir())
    for path in [*files, root / "puzzles.yaml"]:
        digest.update(str(path.relative_to(root)).encode() + b"\0")
        with contextlib.suppress(OSError):
            digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()
