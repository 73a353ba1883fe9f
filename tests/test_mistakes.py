"""The mistakes a report may name (checks/engine/judging/rules/mistakes.py), on hand-made calls: each one's output
fits that mistake, a cause is proven only by exactly one mistake over every failing case with one of them not
degenerate, and the report's line says what is known when none is. No grading process: these run in a second."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from checks import verdict as V
from checks.engine.inputs import draw_case
from checks.engine.judging.rules import mistakes
from checks.engine.judging.rules.problem import CaseContext
from checks.engine.judging.wording import cause_over_cases
from checks.puzzles import spec_module
from checks.registry import get_puzzle


def call(number: str, index: int, blocks: dict[str, int] | None = None) -> CaseContext:
    """CPU case `index` of puzzle `number`, drawn as a check with --seed 3 draws it, with the right outputs."""
    puzzle = get_puzzle(number)
    _, inputs, _ = draw_case(puzzle, index, seed=3)
    expected = spec_module(puzzle).reference(inputs)
    obs = SimpleNamespace(launches=[SimpleNamespace(own=True, blocks=blocks or {})])
    outputs = [e.value.to(e.dtype) for e in expected]
    return CaseContext(puzzle, puzzle.cases.cpu[index], inputs, expected, outputs, obs)  # type: ignore[arg-type]


def returning(ctx: CaseContext, prediction: mistakes.Prediction) -> CaseContext:
    """The call with the outputs the mistake predicts, in the dtypes the learner returns (the others right)."""
    ctx.outputs = [prediction.get(e.name, e.value).to(e.dtype) for e in ctx.expected]
    return ctx


BLOCKS = {"BLOCK_M": 64, "BLOCK_N": 32}
# (puzzle, CPU case, the mistake), each case one whose right answer differs from the mistake's
FITS = [
    ("8a", 0, "sm_scale left out"),
    ("8a", 0, "sm_scale applied twice"),
    ("8a", 0, "exp of base-2 scores"),
    ("8a", 3, "hard-coded 1/sqrt(D)"),  # sm_scale 0.3, D = 128
    ("8a", 0, "no normaliser"),
    ("8a", 8, "no normaliser"),  # v near 1000: o times l passes 65504, inf where yours is stored in float16
    ("8a", 0, "padding scored 0"),  # N = 100 in blocks of 32: 28 lanes past N
    ("9", 8, "running max from 0"),  # scores of a few hundred below 0
    ("6", 4, "running max from 0"),  # rows of -1e4
    ("9", 3, "causal boundary -1"),
    ("9", 3, "causal boundary +1"),
    ("9", 3, "causal boundary -2"),
    ("9", 3, "causal mask left out"),
    ("9", 3, "diagonal stage one block late"),
    ("9", 3, "diagonal stage one key block"),  # BLOCK_M 64, BLOCK_N 32
    ("12", 0, "kv head h % H_kv"),
    ("13", 0, "kv head h % H_kv"),  # the paged cache: its heads along axis 2
    ("12", 0, "keys past the last split left out"),
    ("8a", 2, "inputs read as contiguous"),  # q, k, v all (B, N, H, D) in memory
    ("8a", 4, "v read through k strides"),  # v strided, k contiguous
    ("8a", 4, "q read through swapped strides"),
    ("10", 0, "dq scaled by 1/sm_scale"),
    ("10", 0, "dk scaled by log2(e)"),
    ("10", 0, "dq scaled by log2(e) and dk scaled by 1/sm_scale"),
]


FAST = {
    ("8a", 0, "no normaliser"),
    ("8a", 8, "no normaliser"),
    ("9", 3, "diagonal stage one block late"),
}  # `make test`; the rest exhaustive


@pytest.mark.parametrize(
    ("number", "index", "name"),
    [pytest.param(*f, id=f"{f[0]}-{f[2]}", marks=() if f in FAST else pytest.mark.exhaustive) for f in FITS],
)
def test_each_mistake_is_proven_by_the_output_it_gives_and_by_no_other(number, index, name):
    ctx = call(number, index, BLOCKS)
    if name == "keys past the last split left out":  # the kept keys are read off the returned lse
        ctx = returning(ctx, mistakes._keys_up_to(ctx, 256))
    prediction = mistakes.BY_NAME[name].predict(ctx)
    assert prediction is not None
    fits = mistakes.fitting(returning(ctx, prediction))
    assert list(fits) == [name], fits
    assert mistakes.proven([fits], [mistakes.degenerate(ctx)]) == name
    assert fits[name].startswith(("Yours", "Your "))


@pytest.mark.exhaustive
def test_a_right_output_fits_no_mistake():
    for number, index in (("8a", 0), ("9", 3), ("10", 0), ("12", 0)):
        assert mistakes.fitting(call(number, index, BLOCKS)) == {}


def test_a_case_of_one_row_fits_several_mistakes_and_decides_nothing_alone():
    ctx = call("9", 1, BLOCKS)  # N = 1, causal: row 0 without its key sees none
    assert mistakes.degenerate(ctx)
    prediction = mistakes.BY_NAME["causal boundary -1"].predict(ctx)
    assert prediction is not None
    fits = mistakes.fitting(returning(ctx, prediction))
    assert {"causal boundary -1", "causal boundary -2", "diagonal stage one block late"} <= set(fits), fits
    assert mistakes.proven([fits], [True]) is None
    assert mistakes.proven([{"causal boundary -1": ""}], [True]) is None  # one mistake, on a degenerate case alone


def test_two_mistakes_that_give_the_same_values_prove_neither():
    ctx = call("8a", 4)  # q and v (B, N, H, D) in memory, k contiguous: k through q's strides is k through v's
    prediction = mistakes.BY_NAME["k read through q strides"].predict(ctx)
    assert prediction is not None
    fits = mistakes.fitting(returning(ctx, prediction))
    assert {"k read through q strides", "k read through v strides"} <= set(fits), fits
    assert mistakes.proven([fits], [False]) is None


def test_a_cause_is_proven_only_when_exactly_one_mistake_fits_every_failing_case():
    a, b = {"a": "", "b": ""}, {"a": ""}
    assert mistakes.proven([a, b], [True, False]) == "a"  # the case of one row agrees with a case that decides
    assert mistakes.proven([a, a], [False, False]) is None  # two mistakes give the same values everywhere
    assert mistakes.proven([b, {}], [False, False]) is None  # a failing case the mistake does not give
    assert mistakes.proven([], []) is None


def failing(index: int, fits: dict[str, str], degenerate: bool = False) -> V.CaseResult:
    first = next(iter(fits), "")
    details = [fits[first] if first else "first at [0]", "query rows: all 1"]
    return V.CaseResult(
        index, f"case {index + 1}'s inputs", False, details=details, fits=fits, degenerate=degenerate, stated=first
    )


def test_an_unproven_cause_is_said_as_what_is_known_with_the_command_that_shows_another_case():
    left = {"causal boundary -1": "Yours is ... keys 0..i - 1", "causal boundary -2": "Yours is ... keys 0..i - 2"}
    failed = [failing(1, left, degenerate=True), failing(3, {}), failing(4, {})]
    cause_over_cases(failed, "9", "p9.py", seed=3)
    line = failed[0].details[0]
    assert line.startswith(
        "No cause is proven: the reference with the causal boundary 1 key to the left of the diagonal gives the values "
        "of case 2, but not those of cases 4, 5, which fail too; on case 2 so does the reference with the causal "
        "boundary 2 keys to the left of the diagonal (case 2 has a sequence of one row or one key"
    ), line
    assert "make map PUZZLE=9 FILE=p9.py ARGS='--case 4 --seed 3'" in line, line
    assert "keys 0..i - 1" not in line
    assert not failed[0].cause and failed[0].details[1] == "query rows: all 1"
    on_gpu = [failing(1, left, degenerate=True), failing(3, {})]
    cause_over_cases(on_gpu, "9", "p9.py", seed=3, interpreter=False)
    assert "make check PUZZLE=9 FILE=p9.py ARGS='--case 4 --seed 3'" in on_gpu[0].details[0]
    notebook = [failing(1, left, degenerate=True), failing(3, {})]
    cause_over_cases(notebook, "9", seed=3)
    assert (
        "make map PUZZLE=9 ARGS='--case 4 --seed 3', or show(9, case=4, seed=3) in the notebook"
        in notebook[0].details[0]
    )


def test_a_cause_proven_over_every_failing_case_is_kept_and_put_first():
    both = {"causal boundary -2": "minus two", "causal boundary -1": "minus one"}
    failed = [failing(1, both, degenerate=True), failing(3, {"causal boundary -1": "minus one, case 4"})]
    cause_over_cases(failed, "9", seed=3)
    assert failed[0].details[0] == "minus one"  # the first case's own sentence of the proven mistake
