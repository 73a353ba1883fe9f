"""The suite's settings: Triton's interpreter and the fork server without a GPU, the machine's mode, and the limit on
unmarked tests."""

from __future__ import annotations

import os

import pytest
import torch

# Without a GPU, Triton must be in interpreter mode before anything imports it: tests that run
# kernels in-process (the watchers, the recorder) would otherwise meet compiled kernels they cannot run.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
    # Grading processes in the interpreter are forked from a fork server that imported torch and Triton once
    # (one per worker), not started afresh each time (seconds each): checks.engine.processes.forking.
    os.environ.setdefault("CHECKS_FORK_SERVER", "1")


@pytest.fixture(scope="session")
def machine_mode() -> str:
    """How this machine grades: "gpu" with a CUDA GPU, else "interpreter"."""
    import torch

    return "gpu" if torch.cuda.is_available() else "interpreter"


# A test that grades in a grading process, runs a notebook or records kernels in the interpreter takes
# seconds: it says so where it is defined (`pytestmark = pytest.mark.slow`, or `@pytest.mark.slow`), and
# `make test-fast` (-m "not slow") leaves it out. An unmarked test that runs longer fails, so a slow test
# cannot pass for fast. The limit is on the test's own call (not its fixtures), with room for a busy machine:
# CI runs two workers on two cores, and a test that takes 0.3 s alone can take a few times that there.
FAST_LIMIT_S = 2.0


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if call.when != "call" or not report.passed or item.get_closest_marker("slow") is not None:
        return
    if call.duration > FAST_LIMIT_S * _load_factor():
        report.outcome = "failed"
        report.longrepr = (
            f"{item.nodeid} took {call.duration:.1f} s but is not marked slow: mark it "
            "(@pytest.mark.slow, or pytestmark = pytest.mark.slow in its module) or make it faster."
        )


def _load_factor() -> float:
    """How many times slower than alone a test may run now: the machine's load over its cores, at least 1."""
    try:
        load = os.getloadavg()[0]
    except OSError:
        return 1.0
    return max(1.0, load / max(1, os.cpu_count() or 1))
