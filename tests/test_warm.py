"""The warm grader: used only by a person at a terminal, grades exactly as `python -m checks` does, keeps no
check alive once its terminal is gone, and gives way to a grader started for other code or settings."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from checks import warm
from checks.engine.processes import process_table
from checks.registry import ROOT
from tests.helpers import SLEEPS_IN_ITS_FIRST_CASE, as_at_a_terminal


def test_only_a_person_at_a_terminal_gets_a_warm_grader() -> None:
    assert warm.wanted(["1"], {}, at_terminal=True)
    assert not warm.wanted(["1"], {}, at_terminal=False)  # piped, captured: a tool reads the verdict
    assert not warm.wanted(["1"], {"CI": "true"}, at_terminal=True)  # a class's CI grades each check afresh
    assert not warm.wanted(["1", "--json"], {"CHECKS_WARM": "1"}, at_terminal=True)
    assert not warm.wanted(["1"], {"CHECKS_WARM": "0"}, at_terminal=True)
    assert warm.wanted(["1"], {"CHECKS_WARM": "1", "CI": "true"}, at_terminal=False)


def _course(root: Path) -> Path:
    (root / "checks").mkdir(parents=True)
    (root / "checks" / "cli.py").write_text("x = 1\n")
    (root / "puzzles.yaml").write_text("puzzles: []\n")
    return root


def test_the_fingerprint_follows_the_code_and_the_environment_but_not_the_shell(tmp_path) -> None:
    root = _course(tmp_path)
    first = warm.fingerprint({"A": "1", "PWD": "/here"}, root)
    assert warm.fingerprint({"A": "1", "PWD": "/there", "OLDPWD": "/here"}, root) == first
    assert warm.fingerprint({"A": "2", "PWD": "/here"}, root) != first
    (root / "checks" / "cli.py").write_text("x = 22\n")  # the grader's code changed
    assert warm.fingerprint({"A": "1", "PWD": "/here"}, root) != first


def test_a_folder_others_can_write_is_not_used(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert warm.folder() == tmp_path / f"checks-warm-{os.getuid()}"
    (tmp_path / f"checks-warm-{os.getuid()}").chmod(0o777)
    assert warm.folder() is None


def test_without_a_warm_grader_nothing_is_waited_for(tmp_path) -> None:
    assert warm.connect(tmp_path / "none.sock") is None
    assert not warm.held(tmp_path / "none.sock")


@pytest.fixture
def warm_env():
    """An environment whose warm graders live in a folder of their own, and are told to leave at the end."""
    base = Path(tempfile.mkdtemp(prefix="w", dir="/tmp"))  # short: a socket's path has at most 107 bytes
    env = dict(os.environ, CHECKS_WARM="1", TMPDIR=str(base), CHECKS_PROGRESS_FILE=str(base / "progress.json"))
    env["CHECKS_FORK_SERVER"] = (
        "0"  # grading processes started as `python -m checks.engine.grading_process.main`, found by that
    )
    yield env, base / f"checks-warm-{os.getuid()}"
    for sock in (base / f"checks-warm-{os.getuid()}").glob("*.sock"):
        if conn := warm.connect(sock, wait=10):
            with conn:
                conn.sendall(warm.QUIT)
    time.sleep(0.5)
    shutil.rmtree(base, ignore_errors=True)


def _check(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "checks", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )


def _processes() -> list[tuple[int, str]]:
    listing = subprocess.run(["ps", "-ww", "-eo", "pid,args"], capture_output=True, text=True).stdout.splitlines()[1:]
    return [(int(line.split(None, 1)[0]), line.split(None, 1)[1]) for line in listing if len(line.split(None, 1)) == 2]


def _grading_processes(base: Path) -> set[int]:
    """The grading processes of the warm graders whose temporary folder is `base`, by process id (their command line
    names no folder: the check's folder comes with the job)."""
    return {
        pid
        for pid, args in _processes()
        if "checks.engine.grading_process.main" in args and f"TMPDIR={base}" in process_table.environment(pid)
    }


def _started_a_case(base: Path, earlier: frozenset[Path] = frozenset()) -> bool:
    """Whether a recording process under `base` runs the learner's code: it has reported its machine, the last
    event before the first case's call (in an events file not in `earlier`: an earlier check's folder may still
    be there)."""
    for events in set(base.rglob("events-record.jsonl")) - earlier:
        with contextlib.suppress(OSError):  # a finished check's folder may go away while it is read
            if '"machine"' in events.read_text(errors="replace"):
                return True
    return False


def _one_socket(folder: Path, run: subprocess.CompletedProcess) -> Path:
    """The one warm grader's socket in `folder`; failing, what the folder holds, its logs and what the check said."""
    socks = list(folder.glob("*.sock"))
    if len(socks) != 1:
        logs = {log.name: log.read_text(errors="replace")[-2000:] for log in folder.glob("*.log")}
        files = sorted(p.name for p in folder.iterdir()) if folder.exists() else "no folder"
        raise AssertionError(f"{len(socks)} sockets; the folder holds {files}; logs {logs}; the check said "
                             f"{run.stdout[-1500:]!r} {run.stderr[-1500:]!r}")  # fmt: skip
    return socks[0]


def _served(folder: Path) -> list[str]:
    return [line for log in folder.glob("*.log") for line in log.read_text().splitlines() if "served" in line]


@pytest.mark.slow
def test_the_warm_grader_grades_as_a_fresh_process_does(warm_env) -> None:
    env, folder = warm_env
    cold = _check(dict(env, CHECKS_WARM="0"), "2", "--solution", "--seed", "5")
    first = _check(env, "2", "--solution", "--seed", "5")
    _one_socket(folder, first)  # failing, it says what the folder and the warm grader's log hold
    assert len(_served(folder)) == 1
    assert first.returncode == cold.returncode == 0
    assert first.stdout.splitlines()[-1] == cold.stdout.splitlines()[-1]
    torch_only = folder.parent / "torch_only.py"
    torch_only.write_text("def matrix_add(a, b):\n    return a + b\n")
    wrong = _check(env, "2", "--file", str(torch_only))
    assert wrong.returncode == 1 and "was computed on the host" in wrong.stdout
    usage = _check(env, "abc")
    assert usage.returncode == 2 and "There is no puzzle abc" in usage.stderr
    assert len(_served(folder)) == 3
    (sock,) = folder.glob("*.sock")
    for garbage in (b"not json\n", b'{"argv": 1}\n', b"quit?\n"):  # not a client: ignored, the next check served
        with warm.connect(sock) as conn:
            socket.send_fds(conn, [garbage], [0, 1, 2] if garbage != b"quit?\n" else [])
    assert _check(env, "1", "--solution").returncode == 0 and len(_served(folder)) == 4
    assert len({line.split()[0] for line in _served(folder)}) == 1  # one warm grader served them all

    # a check for other settings: the old grader retires (its socket first, then its spare processes), a new one serves
    old = _one_socket(folder, wrong)
    other = _check(dict(env, CHECKS_SOME_SETTING="x"), "1", "--solution")
    assert other.returncode == 0
    for _ in range(100):  # the old one gone, the new one listening
        if not old.exists() and len(list(folder.glob("*.sock"))) == 1:
            break
        time.sleep(0.1)
    assert not old.exists()
    _one_socket(folder, other)  # failing, what the folder, the logs and the check hold
    servers = lambda: [pid for pid, args in _processes() if "warm_server" in args and str(folder) in args]
    for _ in range(100):
        if len(servers()) == 1:
            break
        time.sleep(0.1)
    assert len(servers()) == 1

    stop = [sys.executable, "-m", "checks.warm", "stop"]
    told = subprocess.run(stop, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert told.stdout.strip() == "Told 1 warm grader(s) to leave."
    for _ in range(100):
        if not list(folder.glob("*.sock")):
            break
        time.sleep(0.1)
    assert not list(folder.glob("*.sock")) and not _grading_processes(folder.parent)


@pytest.mark.slow
def test_a_check_whose_terminal_went_away_is_stopped_then_the_grader_serves_and_ends_clean(warm_env, tmp_path) -> None:
    env, folder = warm_env
    slow = tmp_path / "slow.py"
    slow.write_text(SLEEPS_IN_ITS_FIRST_CASE)
    assert _check(env, "1", "--solution").returncode == 0  # the warm grader is up
    earlier = frozenset(folder.parent.rglob("events-record.jsonl"))
    said = tmp_path / "client.txt"
    with open(said, "wb") as out:
        client = subprocess.Popen(  # -X faulthandler: an abort (below) prints where each of its threads was
            [sys.executable, "-X", "faulthandler", "-m", "checks", "1", "--file", str(slow)],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=out,
            preexec_fn=as_at_a_terminal,
        )
    for _ in range(600):  # until its recording process runs case 1: it is in the learner's time.sleep
        if _started_a_case(folder.parent, earlier):
            break
        time.sleep(0.1)
    time.sleep(0.5)
    busy = _grading_processes(folder.parent)
    assert busy and client.poll() is None
    client.send_signal(signal.SIGINT)  # Ctrl-C at the terminal
    try:
        status = client.wait(timeout=30)
    except subprocess.TimeoutExpired:  # say why: its signal masks, its threads, and where they were
        masks = Path(f"/proc/{client.pid}/status").read_text().splitlines()
        masks = [line for line in masks if line.startswith(("Threads", "SigBlk", "SigIgn", "SigCgt"))]
        client.send_signal(signal.SIGABRT)
        client.wait(timeout=30)
        status = f"still running 30 s later ({', '.join(masks)}), having said: {said.read_text(errors='replace')}"
    assert status == 130 and "Stopped: no verdict was given or recorded." in said.read_text()
    time.sleep(1.0)
    assert not busy & _grading_processes(
        folder.parent
    )  # that check's grading process was stopped (new ones wait for the next)
    after = _check(env, "5", "--solution")
    assert after.returncode == 0 and "PASSED" in after.stdout, after.stdout + after.stderr
    assert any("served" in line and "'5'" in line for line in _served(folder))

    # the machine shuts down, or an instructor stops it: SIGTERM, not `python -m checks.warm stop` (tested above)
    (server,) = [pid for pid, args in _processes() if "warm_server" in args and str(folder) in args]
    os.kill(server, signal.SIGTERM)
    for _ in range(100):
        if not list(folder.glob("*.sock")) and not _grading_processes(folder.parent):
            break
        time.sleep(0.1)
    assert not list(folder.glob("*.sock")) and not _grading_processes(folder.parent)  # nothing left behind
