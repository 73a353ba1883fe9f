"""Every answer key passes every case; every known-wrong kernel fails, for its own reason (the rule it names)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from checks import verdict as V
from checks.authoring.wrong import known_wrong, materialize, name_of
from checks.engine.grade import grade
from checks.engine.judging.rules import rulebook
from checks.instructor.solutions import expectations, meets
from checks.puzzles.largest import MAKERS
from checks.verdict import format_verdict
from tests.helpers import HOPPER, JUPYTER, READY, puzzle_params, switch_off, wrong_kernels

pytestmark = pytest.mark.slow


def grade_wrong(puzzle, path, cases: list[int] | None = None):
    expected = expectations(path)
    timeout = 4 if any(e.rule == V.TIMEOUT for e in expected) else None  # an endless loop: no need to wait long
    with tempfile.TemporaryDirectory(prefix="wrong-") as folder:
        graded = materialize(puzzle, path, Path(folder))
        return grade(puzzle, graded, timeout=timeout, time_it=False, first_failure=True, cases=cases)


@pytest.mark.skipif(JUPYTER, reason="graded as its notebook filled with it (tests/test_notebooks.py)")
@pytest.mark.parametrize("puzzle", puzzle_params())
def test_answer_key_passes(puzzle, machine_mode):
    verdict = grade(puzzle, solution=True)
    assert verdict.passed, format_verdict(verdict)
    assert verdict.mode == machine_mode
    assert len(verdict.cases) == len(puzzle.cases.on(gpu=machine_mode == "gpu"))


def pinning_kernel(rule: str, puzzles: list = READY):
    """A known-wrong kernel that only this rule may reject."""
    for puzzle in puzzles:
        for path in known_wrong(puzzle):
            if {e.rule for e in expectations(path)} == {rule}:
                return puzzle, path
    return None


# A rule only Gluon kernels can break (mma_waited) is pinned by the Hopper track's known-wrong kernels, graded on a
# Hopper GPU only: tests/test_mma_waits.py switches it off on their findings here, tests/test_hopper_gpu.py grades them.
PINNED_ON_HOPPER = {
    rule for rule in rulebook.all_rules() if pinning_kernel(rule) is None and pinning_kernel(rule, HOPPER) is not None
}
PINNED = sorted(set(rulebook.all_rules()) - PINNED_ON_HOPPER)
PINS = {rule: pinning_kernel(rule) for rule in PINNED}
PINNING = {found[1]: rule for rule, found in PINS.items() if found is not None}


# The rules every puzzle applies alike, from the same code and the puzzle's declared tensors: the guard bands around
# every tensor, the host's torch, the output's form, the inputs left unchanged, the time limit.
COURSE_WIDE = frozenset({"no_load_outside", "no_write_outside", "torch_free", "output_form", "inputs_unchanged",
                         "timeout", "values"})  # fmt: skip


def representatives() -> set[Path]:
    """For each puzzle and each set of method rules its known-wrong kernels expect, the first such kernel by name: in
    `make test` with the pinning kernels below, so that every method rule of every puzzle is seen to reject a kernel.
    Kernels that only `values` rejects are `exhaustive` beside the one that pins it (each puzzle's untouched stub fails
    in `make test` too). Those that only course-wide rules reject (`COURSE_WIDE`) are graded here once per set of
    rules, in the first puzzle that has one: the rule's code is the same in every puzzle. Those that only
    `offsets_fit` rejects are one probe's findings on every puzzle alike: the first of each kind of largest inputs
    (`checks.puzzles.largest.MAKERS`: 3 and 4 share the matmul's) is graded here, and tests/test_overflow.py probes
    every one of them in this process, with its line. The rest are `exhaustive` (`make test-all`, and
    `make solutions` grades every one)."""
    first: dict[tuple[str, frozenset[str]], Path] = {}
    for puzzle, path in wrong_kernels():
        rules = frozenset(e.rule for e in expectations(path))
        if rules == {"offsets_fit"}:
            first.setdefault((MAKERS[puzzle.slug].__name__, rules), path)
        elif rules <= COURSE_WIDE:
            if rules != {"values"}:
                first.setdefault(("every puzzle", rules), path)
        else:
            first.setdefault((puzzle.number, rules), path)
    return set(first.values())


REPRESENTATIVES = representatives()


@pytest.mark.parametrize(
    ("puzzle", "path"),
    [
        pytest.param(p, f, id=f"{p.stem}/{name_of(f)}", marks=() if f in REPRESENTATIVES else pytest.mark.exhaustive)
        for p, f in wrong_kernels()
        if f not in PINNING
    ],
)
def test_known_wrong_kernel_is_rejected(puzzle, path):
    """Each known-wrong kernel but those that pin a rule, which the mutation check below grades and judges the same
    way before it switches their rule off."""
    assert_rejected_for_its_reason(path, grade_wrong(puzzle, path))


def assert_rejected_for_its_reason(path: Path, verdict: V.Verdict) -> None:
    expected = expectations(path)
    report = format_verdict(verdict)
    assert not verdict.passed, f"{path.name} must fail:\n{report}"
    assert verdict.status in (V.FAILED, V.ERROR, V.TIMEOUT, V.CRASHED), report
    assert meets(verdict, expected), f"expected {expected!r}, rejected by {verdict.rule!r}:\n{report}"
    if verdict.rule == "values" and any(why in e.text for e in expected for why in SAYS_WHY):
        # a GPU verdict that says only where takes the interpreter's why (checks.engine.grade.explain_wrong_values)
        assert next(c for c in verdict.cases if not c.passed).diagnosed, report


SAYS_WHY = ("the merge of the splits",)  # what `values` says when its access log shows why


# rules that compare what a submission does in one call with what it did in the calls before
ACROSS_CALLS = frozenset({"kept_state", "plan_from_shapes", "inputs_unchanged", "timeout"})


@pytest.mark.parametrize("rule", PINNED)
def test_switching_a_rule_off_lets_its_known_wrong_kernel_through(rule, monkeypatch):
    """The mutation check on real kernels: its kernel is rejected for the rule (as every known-wrong kernel is, above),
    and with the rule off, no longer rejected for it.

    With the rule on, grading stops at the kernel's first failing case; with the rule off, that case is graded again
    alone (with the cases before it where the rule judges across calls: a kernel that keeps state between calls fails
    only after them), not those after it: a rule switched off finds nothing in any case, so the first one it rejected
    is where it mattered.
    """
    found = PINS[rule]
    assert found is not None, f"no known-wrong kernel is rejected by {rule} alone: add one"
    puzzle, path = found
    with_rule = grade_wrong(puzzle, path)
    assert_rejected_for_its_reason(path, with_rule)
    judged = [case.index for case in with_rule.cases]
    judged = judged if rule in ACROSS_CALLS else judged[-1:]
    switch_off(monkeypatch, rule)
    verdict = grade_wrong(puzzle, path, cases=judged or None)  # none judged: it was rejected before any case ran
    assert not meets(verdict, expectations(path)), format_verdict(verdict)


@pytest.mark.parametrize("puzzle", puzzle_params())
def test_untouched_notebook_stub_fails_and_says_where_to_work(puzzle):
    verdict = grade(puzzle)  # the committed notebook: its graded cell is the stub
    assert verdict.status == V.ERROR
    assert "still the stub" in verdict.summary and puzzle.notebook.name in verdict.summary
