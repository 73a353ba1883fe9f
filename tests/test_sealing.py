"""No process left behind by a grading process: the replay starts only once nothing of the learner's runs."""

from __future__ import annotations

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
from checks.registry import get_puzzle


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
