"""The machine's processes as Linux's /proc shows them: the one place the grader reads it.

`checks.engine.processes.sealing` looks here for what a grading process left running,
`checks.engine.processes.forking` for how a
grading process of a fork server that died ended, and the fork server (`checks.engine.grading_process.fork_server`) for
its own children and threads. Where there is no /proc (macOS), no process is found and one asked about by its id is
gone.

Each reader takes a moment's snapshot: a process may end, or its id be reused, right after it was read.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
ENDED_STATES = "ZX"  # a zombie (ended, not reaped yet) or dead


@dataclass(frozen=True)
class ProcessEntry:
    """One process, from /proc/PID/stat."""

    pid: int
    state: str  # one letter: R running, S sleeping, D waiting on a disk, T stopped, Z zombie, X dead, ...
    parent: int
    group: int  # its process group
    session: int
    started: int = 0  # when it started, in clock ticks since the machine booted (no process can change it)

    @property
    def ended(self) -> bool:
        """Whether it ran to its end (a zombie waiting to be reaped, or dead)."""
        return self.state in ENDED_STATES


def lookup(pid: int) -> ProcessEntry | None:
    """The process `pid`, or None when there is none (it is gone, or there is no /proc)."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
        # "PID (COMMAND) STATE PPID PGRP SESSION ...": the command may hold spaces and parentheses
        fields = text[text.rindex(")") + 2 :].split()
        return ProcessEntry(pid, fields[0], int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19]))
    except (OSError, ValueError, IndexError):
        return None


SNAPSHOT_ROUNDS = 20  # the most times /proc is listed again while processes keep appearing during a read


def processes() -> list[ProcessEntry]:
    """Every process of the machine; [] where there is no /proc. /proc is read one process at a time, so a process
    may start after the listing and its parent end before it is read: a process that forks and exits would then be
    read as ended with its child missing. The listing is taken again after the reads until no process appeared
    during them, and those that did are read too."""
    if not (PROC / "self" / "stat").exists():
        return []
    entries: dict[int, ProcessEntry] = {}
    listed = _listed()
    for _ in range(SNAPSHOT_ROUNDS):
        for pid in listed - entries.keys():
            if (entry := lookup(pid)) is not None:
                entries[pid] = entry
        appeared = _listed() - listed
        if not appeared:
            break
        listed |= appeared
    return [entries[pid] for pid in sorted(entries)]


def _listed() -> set[int]:
    return {int(path.name) for path in PROC.iterdir() if path.name.isdigit()}


def children_of(parent: int) -> set[int]:
    """The processes whose parent is `parent`."""
    return {process.pid for process in processes() if process.parent == parent}


def environment(pid: int) -> list[str]:
    """The "NAME=value" entries of the environment the process started with; [] when it cannot be read (gone,
    another user's, or no /proc)."""
    with contextlib.suppress(OSError):
        return (PROC / str(pid) / "environ").read_bytes().decode(errors="replace").split("\0")
    return []


def command_line(pid: int) -> str | None:
    """The process's command line, its arguments joined by spaces; None when it cannot be read."""
    with contextlib.suppress(OSError):
        return (PROC / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    return None


def thread_count(pid: int | None = None) -> int:
    """How many threads the process (this one by default) runs."""
    return len(os.listdir(PROC / str(os.getpid() if pid is None else pid) / "task"))
