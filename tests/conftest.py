"""The suite's settings: Triton's interpreter and the fork server without a GPU, the machine's mode, each test's
environment restored after it, and the limit on unmarked tests."""

from __future__ import annotations

import os
import time

import pytest
import torch

# Without a GPU, Triton must be in interpreter mode before anything imports it: tests that run
# kernels in-process (the watchers, the recorder) would otherwise meet compiled kernels they cannot run.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
    # Grading processes in the interpreter are forked from a fork server that imported torch and Triton once
    # (one per worker), not started afresh each time (seconds each): checks.engine.processes.forking.
    os.environ.setdefault("CHECKS_FORK_SERVER", "1")


pytest_plugins = ("pytester",)  # tests/test_suite.py runs small suites of its own under these settings


def pytest_configure(config):
    """With pytest-xdist's workers (`-n 2`, whose default is --dist load), --dist worksteal: a worker that runs out of
    tests takes half of those the other still has queued. --dist load deals the tests out by their number, not their
    time: one worker was left with a queue of gradings while the other, dealt the fast tests, waited minutes at the
    end. (An explicit --dist load reads the same here, and is taken as worksteal too.)"""
    if getattr(config.option, "dist", "no") == "load":
        config.option.dist = "worksteal"


def pytest_collection_modifyitems(items):
    """The modules with tests that grade (marked slow) first, those with the fewest such tests first of all, then the
    modules without: each module's tests stay together and in their order (a module-scoped fixture is made once).

    pytest-xdist's workers (`-n 2`) take the tests in this order, in chunks that shrink towards the end. A module with
    one or a few grading tests holds long ones (a class graded through Slurm, the warm grader, Ctrl-C during a check),
    one with many holds a short grading each (the known-wrong kernels): long tests first and short ones last, the two
    workers end together instead of one of them alone on a long test."""
    grading: dict[object, int] = {}
    for item in items:
        if item.get_closest_marker("slow") is not None:
            grading[item.module] = grading.get(item.module, 0) + 1
    items.sort(key=lambda item: (item.module not in grading, grading.get(item.module, 0)))


@pytest.fixture(autouse=True)
def environment_as_found():
    """Each test leaves os.environ as it found it. Code a test runs in this process writes to it: torch.compile adds
    TORCHINDUCTOR_CACHE_DIR, make grade sets CHECKS_INTERPRETER_PARTS. A later test would see another machine, and
    this worker's fork server, which forks only for the environment it imported torch with, would refuse every
    later grading process, each then started afresh (seconds more each, and test_fork_server's tests fail)."""
    saved = _environment()
    yield
    now = _environment()
    if now != saved:
        for name in now.keys() - saved.keys():
            del os.environ[name]
        os.environ.update(saved)


def _environment() -> dict[str, str]:
    return {name: value for name, value in os.environ.items() if name != "PYTEST_CURRENT_TEST"}  # pytest's own


@pytest.fixture(scope="session")
def machine_mode() -> str:
    """How this machine grades: "gpu" with a CUDA GPU, else "interpreter"."""
    import torch

    return "gpu" if torch.cuda.is_available() else "interpreter"


# A test that grades in a grading process, runs a notebook or records kernels in the interpreter takes
# seconds: it says so where it is defined (`pytestmark = pytest.mark.slow`, or `@pytest.mark.slow`), and
# `make test-fast` (-m "not slow") leaves it out. An unmarked test fails when it spends more than FAST_LIMIT_S of
# CPU in the thread that runs it (not torch's pool threads, which spin on a busy machine: a test of 0.1 s alone
# was once charged 2.4 s of its process's CPU), or takes longer than that on the clock when it started a grading
# process (whose CPU is not this process's), or STALL_ROOM times longer when it did not (room for a busy machine,
# scaled by its load: CI runs two workers on two cores, and a test of 0.1 s alone was once held 3.5 s there), so a
# slow test cannot pass for fast.
FAST_LIMIT_S = 2.0
STALL_ROOM = 3.0
COST = pytest.StashKey[tuple[float, bool]]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    from checks.engine.processes import spawn

    before = {id(proc) for proc in spawn.started}
    cpu = time.thread_time()  # this thread's: not torch's pool threads, nor threads an earlier test left working
    yield
    item.stash[COST] = (time.thread_time() - cpu, any(id(proc) not in before for proc in spawn.started))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if call.when != "call" or not report.passed or item.get_closest_marker("slow") is not None:
        return
    cpu, graded = item.stash.get(COST, (0.0, False))
    room = FAST_LIMIT_S * _load_factor() * (1.0 if graded else STALL_ROOM)  # a grading process's CPU is not ours
    if cpu <= FAST_LIMIT_S and call.duration <= room:
        return
    why = f"took {call.duration:.1f} s ({cpu:.1f} s of CPU{', grading' if graded else ''})"
    report.outcome = "failed"
    report.longrepr = (
        f"{item.nodeid} {why} but is not marked slow: mark it "
        "(@pytest.mark.slow, or pytestmark = pytest.mark.slow in its module) or make it faster."
    )


def _load_factor() -> float:
    """How many times slower than alone a test may run now: the machine's load over its cores, at least 1."""
    try:
        load = os.getloadavg()[0]
    except OSError:
        return 1.0
    return max(1.0, load / max(1, os.cpu_count() or 1))
