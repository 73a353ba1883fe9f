"""The Hopper track graded where it can be: on a Hopper GPU (an H100 or H200), each answer key passes and each
known-wrong kernel is rejected for the reason its `expect:` line gives. Elsewhere tests/test_hopper.py checks that
every way of checking these steps refuses them in one sentence."""

from __future__ import annotations

import pytest

from checks import verdict as V
from checks.authoring.wrong import known_wrong, name_of
from checks.engine.grade import grade
from checks.engine.hopper import hopper_here
from checks.instructor.solutions import check_wrong
from tests.helpers import HOPPER

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not hopper_here(), reason="graded on a Hopper GPU only; tests/test_hopper.py covers elsewhere"),
]


@pytest.mark.parametrize("puzzle", HOPPER, ids=lambda p: p.stem)
def test_a_hopper_key_passes_and_is_timed(puzzle):
    verdict = grade(puzzle, solution=True)
    assert verdict.passed, V.format_verdict(verdict)
    assert verdict.mode == "gpu" and len(verdict.cases) == len(puzzle.cases.gpu)
    assert verdict.timings.get("ratio_vs_baseline"), verdict.timings


WRONG = [(p, path) for p in HOPPER for path in known_wrong(p)]


@pytest.mark.parametrize(("puzzle", "path"), WRONG, ids=[f"{p.number}-{name_of(f)}" for p, f in WRONG])
def test_a_known_wrong_hopper_kernel_is_rejected_for_its_reason(puzzle, path):
    assert check_wrong(puzzle, path) == ""
