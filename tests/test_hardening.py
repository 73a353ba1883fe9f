"""The grading process's audit hook: what the learner's code may not do, and what libraries still may.

An audit hook cannot be removed, so each case runs in a fresh Python: it hardens itself as the grading
process does (the check's folder protected, the grader's package read-only), then runs a few lines as
the learner's code (code of no library's file). A refusal prints the reason and ends the process with
REFUSED_EXIT at once, however the learner's code catches or patches.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from checks.engine.processes.hardening import REFUSED_EXIT
from checks.registry import ROOT

PRELUDE = """
import os, sys
from pathlib import Path
import checks
from checks.engine.processes.hardening import harden
folder = Path(sys.argv[1])
harden([folder], lambda reason: print("REFUSED:", reason, flush=True), read_only=[Path(checks.__file__).parent])
"""


def run_as_learner(code: str, folder: Path, timeout: float = 60) -> subprocess.CompletedProcess:
    (folder / "events.jsonl").write_text("", encoding="utf-8")
    script = PRELUDE + textwrap.dedent(code) + "\nprint('FINISHED', flush=True)\n"
    return subprocess.run(
        [sys.executable, "-c", script, str(folder)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )


REFUSED = {
    "os.fork": ("os.fork()", "os.fork"),
    "os.system": ("os.system('true')", "os.system"),
    "subprocess": ("import subprocess; subprocess.run(['true'])", "subprocess"),
    "os.posix_spawn": ("os.posix_spawn('/bin/true', ['true'], {})", "os.posix_spawn"),
    "os.exec": ("os.execv('/bin/true', ['true'])", "os.exec"),
    "multiprocessing": ("import multiprocessing as m; m.Process(target=print).start()", "process"),
    "gc.get_objects": ("import gc; gc.get_objects()", "gc.get_objects"),
    "gc.get_referrers": ("import gc; gc.get_referrers(folder)", "gc.get_referrers"),
    "gc.get_referents": ("import gc; gc.get_referents(folder)", "gc.get_referents"),
    "sys._getframe": ("sys._getframe().f_back", "sys._getframe"),
    "inspect.currentframe": ("import inspect; inspect.currentframe()", "sys._getframe"),
    "a traceback's frame": ("try:\n    1 / 0\nexcept ZeroDivisionError as e:\n    e.__traceback__.tb_frame", "tb_"),
    "traceback.walk_stack": ("import traceback; list(traceback.walk_stack(None))", "sys._getframe"),
    "sys.settrace": ("sys.settrace(lambda *a: None)", "sys.settrace"),
    "sys.setprofile": ("sys.setprofile(lambda *a: None)", "sys.setprofile"),
    "sys.addaudithook": ("sys.addaudithook(lambda *a: None)", "sys.addaudithook"),
    "ctypes memory": ("import ctypes; ctypes.c_float.from_address(id(folder))", "ctypes"),
    "ctypes libraries": ("import ctypes; ctypes.CDLL(None)", "ctypes"),
    "the events file": ("open(folder / 'events.jsonl', 'a')", "events.jsonl"),
    "reading a result file": ("open(folder / 'case_0.pt', 'wb')", "case_0.pt"),
    "removing a grader's file": ("os.remove(folder / 'events.jsonl')", "events.jsonl"),
    "changing the grader": ("open(Path(checks.__file__).parent / 'verdict.py', 'a')", "verdict.py"),
    "a disguised frame": ("exec(compile('import os; os.fork()', checks.__file__, 'exec'))", "compiling code"),
    "from a thread": ("import threading, gc; t = threading.Thread(target=gc.get_objects); t.start(); t.join()", "gc"),
    "caught and patched": (
        "os._exit = lambda code: None\ntry:\n    os.fork()\nexcept Exception:\n    pass",
        "os.fork",
    ),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_the_learners_code_is_refused_and_the_process_ends(name, tmp_path):
    code, words = REFUSED[name]
    done = run_as_learner(code, tmp_path)
    assert done.returncode == REFUSED_EXIT, (done.stdout, done.stderr)
    assert "REFUSED:" in done.stdout and words in done.stdout and "FINISHED" not in done.stdout, done.stdout


ALLOWED = {
    "logging names its caller": "import logging; logging.warning('x')",
    "warnings name their caller": "import warnings; warnings.warn('x')",
    "a traceback is printed": "import traceback\ntry:\n    1 / 0\nexcept ZeroDivisionError:\n    traceback.print_exc()",
    "files of its own": "open(folder.parent / 'mine.txt', 'w').write('x')",
    "reading the grader's source": "open(Path(checks.__file__).parent / 'verdict.py').read()",
    "the grader's own ctypes and frames": "from checks.engine.processes.sealing import adopt_orphans; adopt_orphans()",
    "threads": "import threading; t = threading.Thread(target=sum, args=([1],)); t.start(); t.join()",
    "exec of its own code": "exec(compile('x = 1', '<learner>', 'exec'))",
}


@pytest.mark.parametrize("name", sorted(ALLOWED))
def test_what_the_learner_may_do_still_works(name, tmp_path):
    done = run_as_learner(ALLOWED[name], tmp_path)
    assert done.returncode == 0 and "FINISHED" in done.stdout and "REFUSED" not in done.stdout, (
        done.stdout,
        done.stderr,
    )


@pytest.mark.slow
def test_libraries_may_use_frames_ctypes_and_processes_on_the_learners_behalf(tmp_path):
    """torch and Triton's interpreter, imported and run after the hook, work (their frames are a library's)."""
    code = """
    os.environ["TRITON_INTERPRET"] = "1"
    import torch, triton, triton.language as tl
    src = folder.parent / "kernel.py"
    src.write_text(
        "import triton, triton.language as tl\\n"
        "@triton.jit\\n"
        "def k(x_ptr, BLOCK: tl.constexpr):\\n"
        "    o = tl.arange(0, BLOCK)\\n"
        "    tl.store(x_ptr + o, tl.load(x_ptr + o) + 1)\\n"
    )
    sys.path.insert(0, str(folder.parent))
    import kernel
    x = torch.zeros(16)
    kernel.k[(1,)](x, BLOCK=16)
    assert float(x.sum()) == 16.0
    """
    done = run_as_learner(code, tmp_path, timeout=120)
    assert done.returncode == 0 and "FINISHED" in done.stdout, (done.stdout, done.stderr[-3000:])


def test_the_hook_costs_little_on_the_events_it_does_not_watch():
    """A graded call raises many audit events (imports, opens, attribute reads); most are not watched.

    Measured in one process, before and after hardening, best of 5 runs of 20000 pairs of events.
    """
    code = textwrap.dedent(
        """
        import sys, time
        from pathlib import Path
        from checks.engine.processes.hardening import harden

        def cost():
            best = float("inf")
            for _ in range(5):
                start = time.perf_counter()
                for _ in range(20000):
                    (lambda: None).__code__  # an audited attribute read the hook lets pass
                    sys.audit("triton.unwatched", 1)
                best = min(best, time.perf_counter() - start)
            return best

        plain = cost()
        harden([Path("/nonexistent-folder")], print)
        print("COST", plain, cost())
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, env={"PYTHONPATH": str(ROOT)}
    )
    plain, guarded = (float(v) for v in done.stdout.split("COST")[1].split())
    assert (guarded - plain) / 40000 < 5e-6, (plain, guarded)  # under 5 microseconds an event


def run_hardened(code: str, folder: Path, hardening: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """`code` as the learner's, after `harden(...)` called with the keyword arguments `hardening` (Python text)."""
    prelude = PRELUDE.replace(
        "read_only=[Path(checks.__file__).parent])", f"read_only=[Path(checks.__file__).parent], {hardening})"
    )
    script = prelude + textwrap.dedent(code) + "\nprint('FINISHED', flush=True)\n"
    return subprocess.run(
        [sys.executable, "-c", script, str(folder)], cwd=ROOT, capture_output=True, text=True, timeout=timeout,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip


SEALED = "writable=[folder / 'own']"
# the recording process: whoever asks (a library's frame too), it writes only in its own folder and starts no process
SEALED_REFUSED = {
    "a library writes elsewhere": ("import numpy; numpy.savetxt(folder / 'elsewhere.txt', [1.0])", "writing outside"),
    "a library starts a process": ("import platform; platform.architecture('/bin/sh')", "starting or signalling"),
    "the learner writes elsewhere": ("open(folder / 'elsewhere.txt', 'w')", "writing outside"),
}


@pytest.mark.parametrize("name", sorted(SEALED_REFUSED))
def test_a_sealed_process_writes_only_in_its_folder_and_starts_nothing_whoever_asks(name, tmp_path):
    (tmp_path / "own").mkdir()
    code, reason = SEALED_REFUSED[name]
    done = run_hardened(code, tmp_path, SEALED)
    assert done.returncode == REFUSED_EXIT and reason in done.stdout and "FINISHED" not in done.stdout, done.stdout
    allowed = run_hardened("import numpy; numpy.savetxt(folder / 'own' / 'x.txt', [1.0])", tmp_path, SEALED)
    assert allowed.returncode == 0 and "FINISHED" in allowed.stdout, (allowed.stdout, allowed.stderr)


KERNELS_ONLY = "kernel_files=['<string>']"  # the code `python -c` runs stands for a kernel
# the replay: the learner's only code is kernels, which run no Python of their own; libraries still may
KERNEL_REFUSED = {  # what each raises first: exec compiles its text
    "exec": ("exec('x = 1')", "compile"),
    "compile": ("compile('x = 1', 'k.py', 'exec')", "compile"),
    "import": ("import tabnanny", "import"),
}


@pytest.mark.parametrize("name", sorted(KERNEL_REFUSED))
def test_in_the_replay_the_learners_code_runs_no_python(name, tmp_path):
    code, event = KERNEL_REFUSED[name]
    done = run_hardened(code, tmp_path, KERNELS_ONLY)
    assert done.returncode == REFUSED_EXIT and f"a kernel cannot hold ({event})" in done.stdout, done.stdout
    library = run_hardened("checks.Puzzle", tmp_path, KERNELS_ONLY)  # the grader's package imports its registry
    assert library.returncode == 0 and "FINISHED" in library.stdout, (library.stdout, library.stderr)


def test_a_library_inside_the_standard_librarys_folder_is_a_library_in_the_replay(tmp_path):
    """A virtual environment may keep its packages under the folder its standard library is in (a GPU machine's
    /opt/.../lib/python3.12/site-packages): a library's frame is a library's first, so Triton's interpreter
    compiling a kernel's helper for it is never taken for the kernel's own compile."""
    import triton

    from checks.engine.processes.hardening import LEARNER, LIBRARY, STDLIB, Guard

    guard = Guard([], lambda reason: None, [], [], kernel_files=[str(tmp_path / "kernels_0.py")])
    library = str(Path(triton.__file__).parent / "runtime" / "interpreter.py")
    guard.stdlib = (*guard.stdlib, str(Path(triton.__file__).parent.parent) + os.sep)  # as on that machine
    assert guard.kind(library) == LIBRARY
    assert guard.kind(os.__file__) == STDLIB and guard.kind(str(tmp_path / "kernels_0.py")) == LEARNER


NO_PROCESSES = """
import os, subprocess, sys, threading
import multiprocessing
import _posixsubprocess  # a path to a process that raises no audit event
from checks.engine.processes.no_processes import forbid_processes
installed = forbid_processes()
ran = []
thread = threading.Thread(target=lambda: ran.append(1))
thread.start()
thread.join()
print("threads", bool(ran))
for name, start in [
    ("fork", os.fork),
    ("subprocess", lambda: subprocess.run(["true"])),
    ("spawn", lambda: multiprocessing.get_context("spawn").Process(target=print).start()),
]:
    try:
        if start() == 0:
            os._exit(0)
        print(name, "started")
    except OSError as exc:
        print(name, "refused", exc.errno)
print("installed", installed)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a Linux seccomp filter")
def test_no_process_starts_from_the_recording_process_by_any_path_but_threads_do():
    done = subprocess.run(
        [sys.executable, "-c", NO_PROCESSES], cwd=ROOT, capture_output=True, text=True, timeout=60,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    lines = done.stdout.splitlines()
    assert "installed True" in lines and "threads True" in lines, (done.stdout, done.stderr)
    assert {"fork refused 1", "subprocess refused 1", "spawn refused 1"} <= set(lines), (done.stdout, done.stderr)
