"""Every answer key passes every case; every known-wrong kernel fails, for its own reason (the rule it names)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from checks import verdict as V
from checks.authoring.wrong import known_wrong, materialize
from checks.engine.grade import grade
from checks.engine.judging.rules import rulebook
from checks.instructor.solutions import expectations, meets
from checks.verdict import format_verdict
from tests.helpers import READY, puzzle_params, switch_off, wrong_params

pytestmark = pytest.mark.slow


def grade_wrong(puzzle, path):
    expected = expectations(path)
    timeout = 10 if any(e.rule == V.TIMEOUT for e in expected) else None  # an endless loop: no need to wait long
    with tempfile.TemporaryDirectory(prefix="wrong-") as folder:
        graded = materialize(puzzle, path, Path(folder))
        return grade(puzzle, graded, timeout=timeout, time_it=False, first_failure=True)


@pytest.mark.parametrize("puzzle", puzzle_params())
def test_answer_key_passes(puzzle, machine_mode):
    verdict = grade(puzzle, solution=True)
    assert verdict.passed, format_verdict(verdict)
    assert verdict.mode == machine_mode
    assert len(verdict.cases) == len(puzzle.cases.on(gpu=machine_mode == "gpu"))


@pytest.mark.parametrize(("puzzle", "path"), wrong_params())
def test_known_wrong_kernel_is_rejected(puzzle, path):
    expected = expectations(path)
    verdict = grade_wrong(puzzle, path)
    report = format_verdict(verdict)
    assert not verdict.passed, f"{path.name} must fail:\n{report}"
    assert verdict.status in (V.FAILED, V.ERROR, V.TIMEOUT, V.CRASHED), report
    assert meets(verdict, expected), f"expected {expected!r}, rejected by {verdict.rule!r}:\n{report}"
    if verdict.rule == "values" and any(why in e.text for e in expected for why in SAYS_WHY):
        # a GPU verdict that says only where takes the interpreter's why (checks.engine.grade.explain_wrong_values)
        assert next(c for c in verdict.cases if not c.passed).diagnosed, report


SAYS_WHY = ("the merge of the splits",)  # what `values` says when its access log shows why


def pinning_kernel(rule: str):
    """A known-wrong kernel that only this rule may reject."""
    for puzzle in READY:
        for path in known_wrong(puzzle):
            if {e.rule for e in expectations(path)} == {rule}:
                return puzzle, path
    return None


PINNED = sorted(set(rulebook.all_rules()))


@pytest.mark.parametrize("rule", PINNED)
def test_switching_a_rule_off_lets_its_known_wrong_kernel_through(rule, monkeypatch):
    """The mutation check on real kernels: with the rule off, its kernel is no longer rejected for it."""
    found = pinning_kernel(rule)
    assert found is not None, f"no known-wrong kernel is rejected by {rule} alone: add one"
    puzzle, path = found
    switch_off(monkeypatch, rule)
    verdict = grade_wrong(puzzle, path)
    assert not meets(verdict, expectations(path)), format_verdict(verdict)


@pytest.mark.parametrize("puzzle", puzzle_params())
def test_untouched_notebook_stub_fails_and_says_where_to_work(puzzle):
    verdict = grade(puzzle)  # the committed notebook: its graded cell is the stub
    assert verdict.status == V.ERROR
    assert "still the stub" in verdict.summary and puzzle.notebook.name in verdict.summary
