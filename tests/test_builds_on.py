"""A puzzle that builds on an earlier step (9 on 9a, 10 on 10b) grades the learner's code with that step's code."""

from __future__ import annotations

from pathlib import Path

import pytest

from checks import verdict as V
from checks.authoring.stubs import module_body, strip_markers
from checks.authoring.wrong import answer_key_body
from checks.engine.grade import grade, prepare
from checks.engine.submission import (
    SubmissionError,
    defined_names,
    earlier_answer_key,
    earlier_step,
    free_names,
    uses_earlier,
)
from checks.registry import ROOT, get_puzzle, load_puzzles

RIGHT = ROOT / "tests" / "submissions" / "right"


def own_code(number: str) -> str:
    """A puzzle's answer key as a learner hands it in, without the code of the step it builds on."""
    return module_body(strip_markers(get_puzzle(number).solution.read_text(encoding="utf-8")))


def test_names_a_module_defines_and_reads():
    code = "import triton\nX = 1\n\n@triton.jit\ndef k(a):\n    b = a + X + helper(a)\n    return len(b)\n"
    assert defined_names(code) == {"triton", "X", "k"}
    assert free_names(code) == {"helper"}  # a, b are bound, len is a builtin, X and triton are defined
    assert uses_earlier(code, "def helper(x):\n    return x\n")
    assert not uses_earlier(code, "def other(x):\n    return x\n")
    assert not uses_earlier("def broken(:\n", "def helper(x): pass")  # the grader reports the syntax error itself
    assert uses_earlier(code, "def broken(:\n", fallback="def helper(x): pass")  # so that its error is reported


def test_the_registry_says_which_steps_build_on_which():
    assert {p.number: p.builds_on for p in load_puzzles() if p.builds_on} == {"9": "9a", "10": "10b"}
    for puzzle in load_puzzles():
        if puzzle.builds_on:
            step = get_puzzle(puzzle.builds_on)
            assert step.order < puzzle.order and step.builds_on is None
            assert earlier_answer_key(puzzle.solution) == step.solution
            assert uses_earlier(own_code(puzzle.number), own_code(step.number))


def test_a_submission_that_uses_the_step_gets_its_code_and_a_whole_one_is_graded_alone(tmp_path: Path):
    puzzle = get_puzzle(9)
    mine = tmp_path / "nine.py"
    mine.write_text(own_code("9"), encoding="utf-8")
    step_key = get_puzzle("9a").solution
    module, names, earlier = prepare(puzzle, mine, False, tmp_path, earlier=step_key)
    assert module == mine and earlier == step_key
    assert names[str(step_key.resolve())] == "your step 9a code in solutions/09a_flash_attention_v2_fwd_noncausal.py"
    whole = RIGHT / "09_two_loops_block128.py"
    assert prepare(puzzle, whole, False, tmp_path, earlier=step_key)[2] is None
    assert prepare(puzzle, None, True, tmp_path)[2] == step_key  # the answer key builds on the step's key
    assert earlier_step(get_puzzle(8), own_code("8"), tmp_path) is None  # puzzle 8 builds on nothing


def test_code_run_in_a_notebook_session_is_written_out_for_the_grader(tmp_path: Path):
    code = answer_key_body(get_puzzle("10b"))
    path, label = earlier_step(get_puzzle(10), own_code("10"), tmp_path, (code, "your 10b cells"))
    assert path.parent == tmp_path and path.read_text(encoding="utf-8") == code and label == "your 10b cells"


def test_a_step_that_cannot_be_read_is_a_clear_usage_error(tmp_path: Path):
    with pytest.raises(SubmissionError, match="builds on your code of step 9a.*--earlier FILE"):
        earlier_step(get_puzzle(9), own_code("9"), tmp_path, tmp_path / "missing.ipynb")


@pytest.mark.slow
def test_the_steps_stub_or_broken_code_is_named_as_the_cause(tmp_path: Path):
    puzzle = get_puzzle(9)
    mine = tmp_path / "nine.py"
    mine.write_text(own_code("9"), encoding="utf-8")
    stub = tmp_path / "stub_9a.py"
    stub.write_text(strip_markers(own_code("9a")).replace("    return o, lse\n", "    raise NotImplementedError("
                    '"Puzzle 9a: fill in flash_attention_v2_fwd_noncausal")\n'), encoding="utf-8")  # fmt: skip
    verdict = grade(puzzle, mine, earlier=stub, time_it=False, first_failure=True, cases=[0])
    assert verdict.status == V.ERROR and "builds on your step 9a code, and that is still the stub" in verdict.summary
    broken = tmp_path / "broken_9a.py"
    broken.write_text("def flash_attention_v2_fwd_noncausal(:\n", encoding="utf-8")
    verdict = grade(puzzle, mine, earlier=broken, time_it=False, first_failure=True, cases=[0])
    assert (
        verdict.status == V.ERROR and "Your step 9a code, which this puzzle builds on, did not load" in verdict.summary
    )
    assert any("broken_9a.py" in line for line in verdict.details), verdict.details


def test_class_grading_pairs_a_puzzle_with_the_same_learners_step(tmp_path: Path):
    from checks.instructor.classroom import find_submissions

    for name in ("amy/09a_fwd.py", "amy/09_causal.py", "bob/9.py", "carl_9a.py", "amy/10_bwd.py"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("", encoding="utf-8")
    found, _ = find_submissions(tmp_path)
    pairs = {(s.learner, s.puzzle.number): s.earlier for s in found}
    assert pairs[("amy", "9")] == tmp_path / "amy" / "09a_fwd.py"
    assert pairs[("bob", "9")] is None and pairs[("amy", "10")] is None and pairs[("carl", "9a")] is None
