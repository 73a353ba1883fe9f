"""No process left behind: before the replay starts, nothing the learner's code started is still running.

Before any result counts, every process the grading process started must be gone: `left_behind` lists the
processes of its session and process group, and (the grader being a child subreaper on Linux, so that an
orphan comes back to it even from a new session) every orphan it adopted that descends from a grading
process (the mark in its environment); it kills them all. A grading process forked by the fork server
(`checks.engine.processes.forking`) leaves its orphans to the server, a child subreaper too: those are
looked for there. `checks.engine.processes.run` calls it once the grading process ended or was killed. A
process that outlived the grading process is tampering.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Collection
from pathlib import Path

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


def _processes() -> list[tuple[int, str, int, int, int]]:
    """(pid, state, parent, process group, session) of every process, from /proc; [] where there is none."""
    found = []
    for entry in Path("/proc").glob("[0-9]*") if Path("/proc/self/stat").exists() else []:
        with contextlib.suppress(OSError, ValueError, IndexError):
            text = (entry / "stat").read_text()
            fields = text[text.rindex(")") + 2 :].split()
            found.append((int(entry.name), fields[0], int(fields[1]), int(fields[2]), int(fields[3])))
    return found


def _marked(pid: int) -> bool:
    """Whether the process started with the grading processes' mark in its environment (it descends from one)."""
    try:
        return f"{MARK}=1".encode() in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False


def _alive(session: int, known: Callable[[], Collection[int]], adopters: Collection[int]) -> list[int]:
    me = os.getpid()
    with starting:
        found, mine = _processes(), known()
    alive = []
    for pid, state, parent, group, sid in found:
        if state in "ZX" or pid == me or pid in mine:
            continue
        if group == session or sid == session or ((parent == me or parent in adopters) and _marked(pid)):  # an orphan
            alive.append(pid)
    return alive


def _describe(pid: int) -> str:
    with contextlib.suppress(OSError):
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        return f"process {pid} ({command[:80]})"
    return f"process {pid}"


def left_behind(
    session: int, known: Collection[int] | Callable[[], Collection[int]], adopters: Collection[int] = ()
) -> list[str]:
    """The processes of a grading process's session (its id is `session`) still alive after it ended, and the
    orphans this process or one of `adopters` (the fork server, a subreaper too) adopted that are none of its own
    `known` children (the grading processes it started, asked for while `starting` is held when a callable);
    each is killed and reaped (an adopter reaps its own)."""
    mine = known if callable(known) else lambda: known
    alive = _alive(session, mine, adopters)
    if alive:
        time.sleep(GRACE)  # a process on its way out is not a survivor
        alive = _alive(session, mine, adopters)
    described = [_describe(pid) for pid in alive]
    for pid in alive:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(OSError):
        os.killpg(session, signal.SIGKILL)
    for pid in alive:
        with contextlib.suppress(OSError):
            os.waitpid(pid, 0)  # an adopted orphan is this process's child now
    return described
