"""No process left behind by a grading process: the replay starts only once nothing of the learner's runs."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time

import pytest

from checks import verdict as V
from checks.engine.contract.protocol import Job
from checks.engine.judging.stage import Stage
from checks.engine.processes import forking, process_table, spawn
from checks.engine.processes.sealing import MARK, adopt_orphans, left_behind
from checks.registry import ROOT, get_puzzle


def mine(proc: subprocess.Popen) -> set[int]:
    """The processes this one started, as the grader knows them: `proc`, and the grading processes and fork server
    of earlier tests."""
    return {proc.pid} | spawn.own_processes()


# A grandchild that a grading process stand-in leaves behind, sleeping: in its own session with `escape`; with
# `detached`, twice forked, in its own session and with an emptied environment, so that nothing of the grading
# process is left on it.
LEAVE_ONE = """
import os, sys, time
if os.fork() == 0:
    if sys.argv[1] in ("escape", "detached"):
        os.setsid()
    if sys.argv[1] == "detached":
        if os.fork() == 0:
            os.execve("/bin/sleep", ["sleep", "60"], {})
        os._exit(0)
    time.sleep(60)
    os._exit(0)
"""
# A grading process stand-in: it leaves its grandchild, and exits.
PARENT = LEAVE_ONE + "time.sleep(0.2)\n"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("how", ["stays", "escape", "detached"])
def test_a_process_that_outlives_the_grading_process_is_found_and_killed(how):
    assert adopt_orphans()  # a setsid'd orphan comes back to this process
    env = {**os.environ, MARK: "1"}  # as every grading process has it
    proc = subprocess.Popen([sys.executable, "-c", PARENT, how], start_new_session=True, env=env)
    started = process_table.lookup(proc.pid).started
    proc.wait(timeout=30)
    time.sleep(0.3)
    survivors = [p for p in process_table.processes() if p.parent == os.getpid() and p.started >= started]
    if how == "detached":  # it came back to this process with no mark of the grading process on it
        assert survivors and all(f"{MARK}=1" not in process_table.environment(p.pid) for p in survivors)
    found = left_behind(proc.pid, mine(proc), since=started)
    assert len(found) == 1 and "process" in found[0], found
    assert all(process_table.lookup(p.pid) is None or process_table.lookup(p.pid).ended for p in survivors)
    assert left_behind(proc.pid, mine(proc), since=started) == []  # killed and reaped: the session is empty now


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_grading_process_that_leaves_nothing_behind_is_clean():
    proc = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    proc.wait(timeout=30)
    assert left_behind(proc.pid, mine(proc)) == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_an_orphan_that_is_no_grading_processes_is_left_alone():
    """A process the grader started itself (a warm grader, in its own session) is none of a grading process's."""
    assert adopt_orphans()
    warm = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True)
    try:
        proc = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
        proc.wait(timeout=30)
        assert left_behind(proc.pid, mine(proc)) == [] and warm.poll() is None
    finally:
        warm.kill()
        warm.wait()


def test_a_process_that_appears_while_proc_is_read_is_in_the_snapshot(monkeypatch):
    """A left-behind process that forks and exits: listed before its child existed, read after it had ended."""
    listings = iter([{10, 11}, {10, 11, 12}, {10, 11, 12}])
    states = {10: "S", 11: "Z", 12: "S"}  # 11 forked 12 and ended between the listing and its read
    monkeypatch.setattr(process_table, "_listed", lambda: next(listings))
    entry = lambda pid: process_table.ProcessEntry(pid, states[pid], 1, pid, pid, 0)
    monkeypatch.setattr(process_table, "lookup", entry)
    assert [p.pid for p in process_table.processes() if not p.ended] == [10, 12]


# A grading process stand-in that takes its token, leaves its grandchild and ends without a report.
LEAVES_ONE_BEHIND = "import sys\nsys.stdin.readline()\n" + LEAVE_ONE


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("how", ["stays", "escape", "detached"])
def test_a_grading_process_that_leaves_a_process_behind_has_tampered(how, tmp_path, monkeypatch):
    def stand_in(module, *args, env, stdout, text=False):
        command = [sys.executable, "-c", LEAVES_ONE_BEHIND, how]
        return subprocess.Popen(command, env=env, stdout=stdout, stdin=subprocess.PIPE, start_new_session=True)

    monkeypatch.setattr(spawn, "start_module", stand_in)
    monkeypatch.delenv(forking.ENV, raising=False)  # started by spawn, which the stand-in replaces
    job = Job("1", str(tmp_path / "p1.py"), {}, seed=1, interpret=True)
    verdict = Stage(get_puzzle("1"), job, "interpreter", tmp_path).run(timeout=30)
    assert verdict.status == V.TAMPERED and "outlived the grading process" in verdict.summary, verdict.summary
    assert left_behind(spawn.started[-1].pid, mine(spawn.started[-1])) == []  # it was killed


# A grader that grades a submission whose host code never returns, so that its recording process is busy, not waiting
# on the pipe whose end the grader's death would close.
GRADER = """
import sys
from pathlib import Path
from checks.engine.grade import grade
from checks.registry import ROOT, get_puzzle
submission = Path(sys.argv[1])
submission.write_text("import time\\ndef vector_add(x, y):\\n    while True:\\n        time.sleep(0.05)\\n")
grade(get_puzzle(1), submission, timeout=300)
"""


def _of_grader(grader: int) -> list[int]:
    """The processes still running that the grader `grader` started (its grading processes, its fork server)."""
    mark = f"CHECKS_GRADER_PID={grader}"
    return [p.pid for p in process_table.processes() if not p.ended and mark in process_table.environment(p.pid)]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.exhaustive  # seconds of imports: test_a_process_ends_with_its_parent_killed_by_sigkill is the cheap one
@pytest.mark.parametrize("start", ["forked", "started"])
def test_grading_processes_end_with_a_grader_killed_by_sigkill(start, tmp_path):
    env = {**os.environ, "CHECKS_PHASES": str(tmp_path / "phases.txt")}
    env.pop("PYTEST_CURRENT_TEST", None)
    if start == "started":
        env.pop(forking.ENV, None)
    grader = subprocess.Popen([sys.executable, "-c", GRADER, str(tmp_path / "p1.py")], env=env)
    try:
        deadline = time.monotonic() + 120
        while "submission loaded" not in ((tmp_path / "phases.txt").read_text() if (tmp_path / "phases.txt").exists()
                                          else ""):  # fmt: skip
            assert grader.poll() is None and time.monotonic() < deadline, "the recording never began"
            time.sleep(0.1)
        running = _of_grader(grader.pid)
        assert running, "no grading process found"
    finally:
        grader.kill()
        grader.wait()
    deadline = time.monotonic() + 10
    while (left := _of_grader(grader.pid)) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in left:  # a failing test leaves nothing running either
        os.kill(pid, 9)
    assert not left, [process_table.command_line(pid) for pid in left]


# A grader stand-in: it starts a process as spawn starts a grading process (whose entry point asks to end with it),
# says its pid, and waits to be killed.
PARENT_OF_ONE = """
import os, subprocess, sys, time
child = "from checks.engine.processes.sealing import end_with_parent as e; e(); print('ready', flush=True); " \\
    "import time; time.sleep(60)"
env = {**os.environ, "CHECKS_GRADER_PID": str(os.getpid())}
print(subprocess.Popen([sys.executable, "-c", child], env=env, start_new_session=True).pid, flush=True)
time.sleep(60)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a Linux parent-death signal")
def test_a_process_ends_with_its_parent_killed_by_sigkill():
    parent = subprocess.Popen([sys.executable, "-c", PARENT_OF_ONE], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
    child = int(parent.stdout.readline())
    assert parent.stdout.readline().strip() == "ready"  # it has asked for the signal
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 5
    while (entry := process_table.lookup(child)) is not None and not entry.ended and time.monotonic() < deadline:
        time.sleep(0.05)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(child, os.WNOHANG)  # this process may have adopted it (a child subreaper)
    alive = entry is not None and not entry.ended
    if alive:
        os.kill(child, 9)
    assert not alive, "the process outlived its parent"
