"""Grading processes forked from the fork server: the verdicts of started ones, the server's life, and starting a
grading process as always whenever the server cannot fork one."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from checks import verdict as V
from checks.authoring.wrong import EDIT_SUFFIX, materialize
from checks.engine.grade import grade
from checks.engine.grading_process.fork_server import exit_code
from checks.engine.processes import forking, process_table, sealing, spawn
from checks.engine.processes.forking import ForkedProcess
from checks.registry import ROOT, get_puzzle
from tests.helpers import submission

pytestmark = pytest.mark.skipif(not forking.wanted(), reason="the fork server serves only Linux machines without a GPU")

SUBMISSIONS = Path(__file__).parent / "submissions"
# (file, the verdict it must get): None is the answer key, (folder, name) a submission under tests/submissions/
EITHER_WAY = {
    "answer key": (None, V.PASSED),
    # a deterministic one: thread_answer's wrong elements depend on its thread's timing, which differs run to run
    "known-wrong kernel": (ROOT / "solutions" / "wrong" / "01_vector_add" / "off_by_one.edit.yaml", V.FAILED),
    "stub": (ROOT / "notebooks" / "01_vector_add.ipynb", V.ERROR),
    "crash": (("broken", "aborts"), V.CRASHED),
    "tampering": (("tampering", "leaves_a_process_through_a_library"), V.TAMPERED),
}
# a crash lists the grading process's frames: the first one is the fork server's module, not the grading process's
FIRST_FRAME = re.compile(r'^.*File ".*(fork_server|grading_process/main)\.py", line \d+ in <module>\n', re.MULTILINE)


EXTENSIONS = re.compile(r"^Extension modules: .*$", re.MULTILINE)
NUMBER = re.compile(r"-?\d+(\.\d+)?(e[+-]?\d+)?")


def verdict_across_runs(verdict: V.Verdict) -> dict[str, Any]:
    """The verdict, less what differs between any two runs (times, addresses, pids, and the values the replay drew
    afresh: the numbers in a wrong case's problem and details) or ways of starting."""
    seen = asdict(verdict)
    del seen["seconds"]
    for case in seen["cases"]:
        del case["seconds"]
        if not case["passed"]:
            case["problem"] = NUMBER.sub("#", case["problem"])
            case["details"] = [NUMBER.sub("#", line) for line in case["details"]]
    seen["details"] = [NUMBER.sub("#", line) for line in seen["details"]]
    seen["picture_data"] = ""
    seen["summary"] = NUMBER.sub("#", re.sub(r"process \d+", "process N", seen["summary"]))
    seen["output"] = FIRST_FRAME.sub("", re.sub(r"0x[0-9a-f]+", "0x...", seen["output"]))
    seen["output"] = EXTENSIONS.sub("", seen["output"])  # the fork server imported more than a fresh process
    return seen


# In make test: a pass, a failure and a crash. The stub (an error found before any case runs) and the tampering one (the
# server's orphans, which tests/test_integrity.py's forked attacks also find) are graded both ways by make test-all.
EVERY_TIME = ("answer key", "known-wrong kernel", "crash")


@pytest.mark.slow
@pytest.mark.parametrize(
    "kind", [k if k in EVERY_TIME else pytest.param(k, marks=pytest.mark.exhaustive) for k in EITHER_WAY]
)
def test_a_forked_grading_process_gives_the_verdict_a_started_one_gives(kind, monkeypatch, tmp_path):
    path, status = EITHER_WAY[kind]
    if isinstance(path, tuple):  # a submission under tests/submissions/, written out if it is an edit file
        path = submission(SUBMISSIONS / path[0], path[1], tmp_path)
    elif path is not None and path.name.endswith(EDIT_SUFFIX):  # a known-wrong edit of the answer key, written out
        path = materialize(get_puzzle(1), path, tmp_path)

    def graded(forked: bool) -> dict[str, Any]:
        monkeypatch.setenv(forking.ENV, "1" if forked else "0")
        verdict = grade(get_puzzle(1), path, solution=path is None, seed=7, timeout=60)
        assert isinstance(spawn.started[-1], ForkedProcess) == forked
        assert verdict.status == status, V.format_verdict(verdict)
        return verdict_across_runs(verdict)

    through_server = graded(forked=True)
    assert through_server == graded(forked=False)
    if kind == "tampering":  # the recording process is sealed: the library's process is refused, whoever asks
        assert "starting or signalling a process" in through_server["summary"]


def _ended(pid: int) -> bool:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # this process may have adopted it (a subreaper)
    process = process_table.lookup(pid)
    return process is None or process.ended


def _parent(pid: int) -> int:
    process = process_table.lookup(pid)
    assert process is not None, f"process {pid} is gone"
    return process.parent


def _wait_for(condition: Any, seconds: float = 20.0) -> bool:
    import time

    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.mark.slow
def test_one_server_forks_every_grading_process_of_this_process(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = spawn.start_grading_process(tmp_path / "a", interpret=True, preload=True)
    second = spawn.start_grading_process(tmp_path / "b", interpret=True, preload=True)
    try:
        assert isinstance(first, ForkedProcess) and isinstance(second, ForkedProcess)
        assert len(forking._server) == 1 and forking.server_pids() == {forking._server[0].proc.pid}
        (server,) = forking.server_pids()
        assert _parent(first.pid) == _parent(second.pid) == server
        assert process_table.thread_count(server) == 1  # it forks from one thread
        assert _wait_for(lambda: os.getsid(first.pid) == first.pid)  # a session of its own, as spawn starts them
        assert sealing._marked(first.pid)  # what it leaves behind is found by the mark
        assert first.pid in spawn.own_processes() and server in spawn.own_processes()
        assert first.poll() is None
    finally:
        spawn.kill(first)
        spawn.kill(second)
    assert first.returncode == -signal.SIGKILL and second.poll() == -signal.SIGKILL


GRADER = """
import os, signal, sys
from pathlib import Path
from checks.engine.processes import forking, spawn
proc = spawn.start_grading_process(Path(sys.argv[1]), interpret=True, preload=True)
print(type(proc).__name__, proc.pid, forking._server[0].proc.pid, flush=True)
sys.stdin.readline()
if sys.argv[2] == "killed":
    os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.slow
@pytest.mark.parametrize("how", ["exits", "killed"])
def test_the_server_ends_with_the_process_that_started_it(how, tmp_path):
    env = {**os.environ, forking.ENV: "1", "PYTHONPATH": str(ROOT)}
    grader = subprocess.Popen(
        [sys.executable, "-c", GRADER, str(tmp_path), how], cwd=ROOT, env=env, stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        kind, forked, server = grader.stdout.readline().split()
        assert kind == "ForkedProcess" and not _ended(int(server)) and not _ended(int(forked))
        grader.stdin.write("\n")
        grader.stdin.flush()
        grader.wait(timeout=60)
        assert _wait_for(lambda: _ended(int(server)) and _ended(int(forked)))
    finally:
        grader.kill()
        grader.wait()


@pytest.mark.slow
def test_a_process_in_another_environment_is_started_as_always(tmp_path, monkeypatch):
    for folder in "abcd":
        (tmp_path / folder).mkdir()
    processes = [spawn.start_grading_process(tmp_path / "a", interpret=True, preload=True)]  # the server runs
    monkeypatch.setenv("CHECKS_SOME_SETTING", "1")  # the course's own settings are read after the imports
    processes.append(spawn.start_grading_process(tmp_path / "b", interpret=True, preload=True))
    monkeypatch.setenv("A_LIBRARY_SETTING", "1")  # another: a library may read it at import
    processes.append(spawn.start_grading_process(tmp_path / "c", interpret=True, preload=True))
    monkeypatch.delenv("A_LIBRARY_SETTING")
    processes.append(spawn.start_grading_process(tmp_path / "d", interpret=True, preload=True))  # the server serves on
    for proc in processes:
        spawn.kill(proc)
    assert [type(p).__name__ for p in processes] == ["ForkedProcess", "ForkedProcess", "Popen", "ForkedProcess"]


@pytest.fixture
def own_server():
    """A fork server of this test's own (the one before is stopped, and this one afterwards)."""
    forking.stop_server()
    yield
    forking.stop_server()


@pytest.mark.slow
def test_a_dead_server_gives_way_to_starting_processes_as_always(tmp_path, own_server):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    forked = spawn.start_grading_process(tmp_path / "a", interpret=True, preload=True)
    server = forking._server[0].proc
    server.kill()
    server.wait()
    started = spawn.start_grading_process(tmp_path / "b", interpret=True, preload=True)
    spawn.kill(started)
    spawn.kill(forked)  # what became of a process its server no longer reports on is still found
    assert isinstance(forked, ForkedProcess) and isinstance(started, subprocess.Popen)
    assert forked.returncode == -signal.SIGKILL and forking.server_pids() == set()


def test_a_server_with_a_second_thread_does_not_serve():
    code = (
        "import threading, time; threading.Thread(target=time.sleep, args=(30,), daemon=True).start(); "
        "from checks.engine.grading_process.fork_server import single_threaded; print(single_threaded() or 'serves')"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert "runs 2 threads" in done.stdout, done.stdout + done.stderr


def test_a_forked_grading_process_ends_with_the_status_python_gives_its_exit():
    assert [exit_code(code) for code in (None, 0, 3, True, -1, 256)] == [0, 0, 3, 1, 255, 0]
    assert exit_code("a message, printed") == 1


@pytest.mark.slow
def test_a_pid_used_again_is_a_running_process_not_the_ended_one_before_it(tmp_path):
    """The server reports each ended grading process; a status nobody asked for stays until asked. Once the system
    gives its pid to a new grading process (pid_max is 32768 on many machines: a long class wraps around), that
    status is not the new process's: it runs, and `stop_all` must still stop it, or the next check's sealing finds
    a process of the server nobody knows and calls the learner's code a tamperer."""
    spawn.start_grading_process(tmp_path, interpret=True, preload=True).kill()  # the server runs
    server = forking._server[0]
    limit = int(Path("/proc/sys/kernel/pid_max").read_text())
    server.ended.update(dict.fromkeys(range(1, limit + 1), 0))  # a stale "exited 0" for every pid there can be
    proc = spawn.start_grading_process(tmp_path, interpret=True, preload=True)
    try:
        assert proc.poll() is None and not _ended(proc.pid)
    finally:
        spawn.kill(proc)
        server.ended.clear()
    assert proc.returncode == -signal.SIGKILL


@pytest.mark.slow
def test_a_maps_recording_is_forked_and_records_what_a_started_one_records(monkeypatch):
    from checks.engine.processes import access_recording

    handles: list[object] = []

    def start(args, log_path):
        handles.append(spawn.start_map_recording(args, log_path))
        return handles[-1]

    monkeypatch.setattr(access_recording, "start_map_recording", start)
    key = ROOT / "solutions" / "02_matrix_add.py"
    forked = access_recording.record_in_own_process(2, key, case=0, timeout=120)
    monkeypatch.setenv(forking.ENV, "0")
    started = access_recording.record_in_own_process(2, key, case=0, timeout=120)
    assert isinstance(handles[0], ForkedProcess) and isinstance(handles[1], subprocess.Popen)
    assert same(forked["log"], started["log"]) and forked["inputs"] == started["inputs"]


def same(a: Any, b: Any) -> bool:
    """Equal, tensors by their values, through dicts and lists."""
    import torch

    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and torch.equal(a, b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return a == b
