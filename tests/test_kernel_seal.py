"""The kernel's seal (checks.engine.processes.landlock) on the processes that run the learner's code.

The recording process and the map recorder are run for real (their own entry points, `main` and `recording.main`),
with the audit hook switched off, so that only the kernel's seal stands: the learner's module, loaded there, tries
every writer (Python's, torch's C++ ones, sqlite3's C, a write through ctypes' libc) into the course tree, the home
folder and a temporary folder outside its own, a TCP connection to a listener this test holds, a signal to a process
of this test, and the course's `.progress.json`. One Python imports torch once and forks both processes from itself,
as the fork server does, so the test costs one start of Python.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from checks.engine.processes import landlock
from checks.registry import ROOT

# the learner's module: each attack, and whether it went through, written into its own folder (which it may write)
ATTACKS = """
import ctypes, json, os, signal, socket, sqlite3
from pathlib import Path
import torch

found = {}
targets = json.loads(os.environ["SEAL_TARGETS"])

def attempt(name, action):
    try:
        found[name] = "failed" if action() is False else "went through"
    except Exception as exc:
        found[name] = f"failed ({type(exc).__name__})"

def mapped(path):
    torch.from_file(path, shared=True, size=8, dtype=torch.uint8).fill_(1)

def database(path):
    sqlite3.connect(path).execute("create table t (x)")

def libc_write(path):
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.open(str(path).encode(), os.O_CREAT | os.O_WRONLY, 0o644)
    return False if fd < 0 else libc.write(fd, b"x", 1) != 1 and False

for where, folder in targets["folders"].items():
    stem = Path(folder) / f"planted-{os.getpid()}"
    attempt(f"torch.from_file in {where}", lambda: mapped(f"{stem}.bin"))
    attempt(f"torch.save in {where}", lambda: torch.save([1], f"{stem}.pt"))
    attempt(f"sqlite3 in {where}", lambda: database(f"{stem}.db"))
    attempt(f"os.open in {where}", lambda: os.close(os.open(f"{stem}.os", os.O_CREAT | os.O_WRONLY)))
    attempt(f"ctypes libc in {where}", lambda: libc_write(f"{stem}.c"))
attempt("sqlite3 on .progress.json", lambda: database(targets["progress"]))
attempt("a TCP connection", lambda: socket.create_connection(("127.0.0.1", targets["port"]), timeout=5).close())
attempt("a signal to another process", lambda: os.kill(targets["sleeper"], signal.SIGTERM))
Path(os.environ["SEAL_RESULTS"]).write_text(json.dumps(found))
"""

# one Python: the audit hook switched off, then a recording process and a map recorder forked, each as it starts
HARNESS = """
import json, os, sys
from pathlib import Path
import checks.engine.processes.hardening as hardening
from checks.engine.grading_process import main as grading, recording
from checks.engine.record import record_job
from checks.engine.contract.protocol import Job
from checks.engine.processes import process_table
from checks.engine.processes import landlock

hardening.harden = record_job.harden = lambda *args, **kwargs: None  # the seal alone
sealing, threads = landlock.seal, Path(sys.argv[2]) / "threads.txt"


def seal(writable):  # how many threads the process runs as it is sealed: Landlock binds only the one that asks
    with open(threads, "a") as f:
        f.write(f"{process_table.thread_count()}\\n")
    return sealing(writable)


landlock.seal = seal
submission, work, scratch, maps = (Path(p) for p in sys.argv[1:5])
recording.interpreter_setup()


def run(child):
    pid = os.fork()
    if pid == 0:
        try:
            child()
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def record():
    os.environ["SEAL_RESULTS"] = str(scratch / "results.json")
    job = Job(puzzle=1, file=str(submission), names={}, seed=1, interpret=True, workdir=str(work), scratch=str(scratch))
    read, write = os.pipe()
    os.write(write, ("token\\n" + job.to_json() + "\\n").encode())
    os.close(write)
    os.dup2(read, 0)
    sys.stdin = open(0, closefd=False)
    grading.main([])


def record_for_a_map():
    os.environ["SEAL_RESULTS"] = str(maps / "results.json")
    recording.main(["1", str(submission), "0", str(maps / "log.pt"), "1"])


run(record)
run(record_for_a_map)
"""


@pytest.fixture
def listener():
    server = socket.create_server(("127.0.0.1", 0))
    yield server
    server.close()


@pytest.mark.skipif(landlock.abi() == 0, reason="no Landlock here: test_an_unsealed_machine_is_said covers that")
def test_the_kernel_seals_the_recording_process_and_the_map_recorder(tmp_path, listener):
    work, scratch, maps, elsewhere = (tmp_path / name for name in ("work", "scratch", "maps", "elsewhere"))
    for folder in (work, scratch, maps, elsewhere):
        folder.mkdir()
    submission = tmp_path / "attack.py"
    submission.write_text(ATTACKS, encoding="utf-8")
    progress = ROOT / ".progress.json"
    before = progress.read_bytes() if progress.exists() else None
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    targets = {
        "folders": {"the course tree": str(ROOT / "checks"), "the home folder": str(Path.home()),
                    "a folder outside its own": str(elsewhere)},
        "progress": str(progress), "port": listener.getsockname()[1], "sleeper": sleeper.pid,
    }  # fmt: skip
    try:
        done = subprocess.run(
            [sys.executable, "-c", HARNESS, str(submission), str(work), str(scratch), str(maps)],
            cwd=ROOT, capture_output=True, text=True, timeout=120,
            env={**os.environ, "PYTHONPATH": str(ROOT), "SEAL_TARGETS": json.dumps(targets), "CHECKS_PHASES": ""},
        )  # fmt: skip
        time.sleep(0.1)
        signalled = sleeper.poll() is not None
    finally:
        sleeper.kill()
        sleeper.wait()
    planted = [p for folder in targets["folders"].values() for p in Path(folder).glob("planted-*")]
    for path in planted:  # a seal that failed leaves nothing in the course tree or the home folder
        path.unlink()
    for where, results in (("the recording process", scratch), ("the map recorder", maps)):
        assert (results / "results.json").exists(), (where, done.stdout[-3000:], done.stderr[-3000:])
        found = json.loads((results / "results.json").read_text())
        assert len(found) == 18, found
        through = [name for name, what in found.items() if not what.startswith("failed")]
        assert not through, f"in {where}: {through}"
    assert not planted, planted
    assert not signalled, "a sealed process signalled a process outside its seal"
    assert (progress.read_bytes() if progress.exists() else None) == before
    assert (work / "threads.txt").read_text().split() == ["1", "1"]  # sealed before any thread of theirs started


def test_the_seal_leaves_the_folders_it_is_given_writable(tmp_path):
    own, other = tmp_path / "own", tmp_path / "other"
    own.mkdir()
    other.mkdir()
    code = textwrap.dedent(
        f"""
        import os, sys
        from pathlib import Path
        from checks.engine.processes import landlock
        events = open({str(tmp_path / "events.jsonl")!r}, "a")  # opened before the seal: still written
        version = landlock.seal([Path({str(own)!r})])
        events.write("after the seal\\n")
        events.flush()
        Path({str(own)!r}, "mine.txt").write_text("mine")
        open(os.devnull, "w").write("x")
        try:
            Path({str(other)!r}, "theirs.txt").write_text("theirs")
        except PermissionError:
            print("REFUSED")
        print("ABI", version)
        """
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (own / "mine.txt").read_text() == "mine"
    assert (tmp_path / "events.jsonl").read_text() == "after the seal\n"
    if landlock.abi():
        assert "REFUSED" in done.stdout and not (other / "theirs.txt").exists(), done.stdout
    else:  # nothing but the network filter: the grading says it was not sealed
        assert (other / "theirs.txt").exists() and landlock.unsealed_reason()


def test_an_unsealed_machine_is_said(monkeypatch):
    monkeypatch.setattr(landlock, "_abi", [0])
    reason = landlock.unsealed_reason()
    assert "offers no Landlock" in reason and "not by the kernel" in reason
    monkeypatch.setattr(landlock, "_abi", [7])
    assert landlock.unsealed_reason() == ""


def test_the_network_filter_refuses_every_socket_but_a_unix_one():
    code = textwrap.dedent(
        """
        import socket
        from checks.engine.processes.landlock import forbid_network
        assert forbid_network()
        socket.socket(socket.AF_UNIX).close()
        for family, kind in ((socket.AF_INET, socket.SOCK_STREAM), (socket.AF_INET6, socket.SOCK_DGRAM)):
            try:
                socket.socket(family, kind)
            except PermissionError:
                print("REFUSED", family)
        """
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("REFUSED") == 2, done.stdout


def test_an_unsealed_grading_is_said_in_the_report_the_doctor_and_the_class_csv(monkeypatch, tmp_path):
    from checks import verdict as V
    from checks.instructor import classroom
    from checks.instructor.class_records import Result, Submission
    from checks.learner import doctor
    from checks.registry import get_puzzle

    monkeypatch.setattr(landlock, "_abi", [0])
    reason = landlock.unsealed_reason()
    report = V.format_verdict(V.Verdict(1, V.PASSED, "All cases match.", unsealed=reason))
    assert report.splitlines()[-1] == reason
    finding = doctor.check_seal()
    assert finding.level == doctor.NOTE and reason in finding.what
    submission = Submission("ann", get_puzzle(1), tmp_path / "ann" / "p1.py")
    classroom.write_csv([Result(submission, V.PASSED, "ok", 1.0, [], reason)], tmp_path / "class.csv", tmp_path)
    assert f"no: {reason}" in (tmp_path / "class.csv").read_text()
    monkeypatch.setattr(landlock, "_abi", [7])
    assert doctor.check_seal().level == doctor.OK
    assert "sealed" not in V.format_verdict(V.Verdict(1, V.PASSED, "All cases match."))
