"""Every answer key passes every case; every known-wrong kernel fails, for its own reason."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from checks import verdict as V
from checks.answer_key import says_any
from checks.sandbox import grade
from checks.verdict import format_verdict
from checks.wrong import materialize
from tests.conftest import expectation, puzzle_params, wrong_params


@pytest.mark.parametrize("puzzle", puzzle_params())
def test_answer_key_passes(puzzle):
    verdict = grade(puzzle, solution=True)
    assert verdict.passed, format_verdict(verdict)
    assert verdict.mode == "interpreter"
    assert len(verdict.cases) == len(puzzle.cases["cpu"])


@pytest.mark.parametrize(("puzzle", "path"), wrong_params())
def test_known_wrong_kernel_is_rejected(puzzle, path):
    expected = expectation(path)
    timeout = 25 if any("time limit" in text for text in expected) else None
    with tempfile.TemporaryDirectory(prefix="wrong-") as folder:
        verdict = grade(puzzle, materialize(puzzle, path, Path(folder)), timeout=timeout)
    report = format_verdict(verdict)
    assert not verdict.passed, f"{path.name} must fail:\n{report}"
    assert verdict.status in (V.FAILED, V.ERROR, V.TIMEOUT, V.CRASHED), report
    assert says_any(report, expected), f"expected one of {expected!r} in the report:\n{report}"


@pytest.mark.parametrize("puzzle", puzzle_params())
def test_untouched_notebook_stub_fails_and_says_where_to_work(puzzle):
    verdict = grade(puzzle)  # the committed notebook: its graded cell is the stub
    assert verdict.status == V.ERROR
    assert "still the stub" in verdict.summary and puzzle.notebook.name in verdict.summary
