"""Diagnoses that prove themselves: each known-wrong submission in tests/submissions/diagnoses/ is graded in the
interpreter, and its report must name the cause the evidence proves (the reference recomputed with the mistake, or
the interpreter's access log), and must not name the causes it used to guess at."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from checks import cli
from checks.authoring.stubs import module_body, strip_markers
from checks.engine.judging.rules import core, mistakes
from checks.engine.judging.wording import triton_error_gloss
from checks.learner import progress
from checks.registry import ROOT, Case, get_puzzle, shown
from tests.helpers import submission

DIAGNOSES = ROOT / "tests" / "submissions" / "diagnoses"
STEP_9A_KEY = "solutions/09a_flash_attention_v2_fwd_noncausal.py"


def report(tmp_path: Path, monkeypatch, capsys, number: str, file: Path, *args: str) -> str:
    """The report of `make check PUZZLE=number FILE=file ARGS='args --seed 3'`, graded in this process."""
    monkeypatch.setenv(progress.ENV_FILE, str(tmp_path / "progress.json"))
    monkeypatch.chdir(ROOT)
    assert cli.main([number, "--file", str(file), *args, "--seed", "3"]) == 1
    return capsys.readouterr().out


EVERY_FAILING_CASE_IS_CAUSAL = "Every failing case has causal=True; all cases with causal=False pass"
# each submission -> (its puzzle, what its report must say, the guesses it must not make)
DIAGNOSED = {
    "01_mask_off_by_one": (
        "1",
        [
            "your store lets exactly one element past the end through, so its mask or bound is off by one "
            "(offsets <= n where offsets < n belongs): fix that comparison."
        ],
        ["give that store a mask"],
    ),
    "02_store_mask_wrong_shape": (  # a common Triton error is glossed beside the raw one
        "2",
        [
            "Your code raised ValueError: Cannot make_shape_compatible: incompatible dimensions at index 1",
            "What Triton's error means: two blocks in one operation have shapes that do not fit together (a mask, "
            "offsets or values of another shape than the pointers they go with",
        ],
        [],
    ),
    "08a_batch_head_swapped": (  # a program's rows land elsewhere
        "8a",
        [
            "272 elements past its end, starting right after its last element; that is exactly 1 whole slice of o "
            "along (query rows, head-dim columns), 17 x 16 elements each, and 1 such slice of o ([0, 1] along batch, "
            "heads) no kernel wrote: a program's rows landed past the end instead of in their own place, which a mask "
            "would only hide.",
            "batch = pid // H, head = pid % H",
        ],
        ["give that store a mask"],
    ),
    "09_causal_diagonal_left_out": (  # row 0 sees no key: NaN, not an overflow
        "9",
        [
            "Yours is what the reference gives when query row i sees the keys 0..i - 1 instead of 0..i: the causal "
            "boundary is 1 key to the left of the diagonal (the diagonal key (query i's own) is left out;",
            "Query row 0 then sees no key at all: the row max stays -inf and exp(-inf - (-inf)) is NaN",
            EVERY_FAILING_CASE_IS_CAUSAL,
        ],
        ["exp overflowed", "subtract the row max first"],
    ),
    "09_causal_one_key_past_diagonal": (  # padding past the end counts too: not a scale
        "9",
        [
            "Yours is what the reference gives when query row i sees the keys 0..i + 1 instead of 0..i: the causal "
            "boundary is 1 key to the right of the diagonal (1 key past the diagonal is let in;",
            "The keys past the end of the sequence that this lets in count too",
            EVERY_FAILING_CASE_IS_CAUSAL,
        ],
        ["A constant scale", "exp overflowed"],
    ),
    "13_seq_lens_one_page_short": (  # keys never read, named for every sequence
        "13",
        [
            "your kernels never loaded the keys 284-299 of sequence 0 (16 of 300); 29-44 of sequence 1 (16 of 45); "
            "114-129 of sequence 2 (16 of 130) from k_cache: every sequence misses its last 16 keys (one page), so "
            "the programs' key range ends 16 short of seq_lens[b]; let it run to seq_lens[b]",
            "batch: all 3",  # every wrong element is accounted for, not only the NaN of batch 2
            "Where a program loaded none of its keys it stored nothing",
        ],
        ["read only the parts of it that a kernel wrote", "a tail that a block or its mask misses"],
    ),
}
# causes proven as the ones above, graded again for each mistake of rules/mistakes.py: `make test-all` grades them
PROVEN = {
    "09_diagonal_stage_one_block_late": (  # the case of one row alone fits "the diagonal key left out" too
        "9",
        [
            "Yours is what the reference gives when each query block leaves out the first key block on its diagonal "
            "(keys start_m * BLOCK_M .. start_m * BLOCK_M + BLOCK_N - 1), on every failing case"
        ],
        ["instead of 0..i", "exp overflowed", "No cause is proven"],
    ),
    "09_diagonal_stage_one_key_block": (  # a square block assumed: BLOCK_M 32, BLOCK_N 16 in the interpreter
        "9",
        [
            "Yours is what the reference gives when each query block sees only the first key block of its diagonal "
            "(keys up to start_m * BLOCK_M + BLOCK_N - 1), on every failing case"
        ],
        ["instead of 0..i", "No cause is proven"],
    ),
    "08a_no_divide_by_l": (
        "8a",
        ["Yours / expected is exactly each query row's sum l = sum of exp(s - m) over its keys, on every failing case"],
        ["a sum with missing terms", "masked lanes loaded as 0", "A constant scale"],
    ),
    "08a_exp_of_base2_scores": (
        "8a",
        ["Your o is what the reference gives with sm_scale = 0.125 x log2(e), on every failing case"],
        ["A constant scale", "sm_scale is left out"],
    ),
    "08a_scale_hard_coded": (
        "8a",
        [
            "Yours is what the reference gives with sm_scale = 1/sqrt(128) instead of the 0.3 the call passed, on "
            "every failing case, and exactly the cases whose sm_scale is not 1/sqrt(D) fail"
        ],
        ["Every failing case has", "ignores the strides"],
    ),
    "12_kv_head_by_remainder": (
        "12",
        ["when query head h reads the keys and values of kv head h % H_kv, on every failing case"],
        ["hold exactly the expected values of another one"],
    ),
    "06_max_from_zero": (
        "6",
        ["Yours is what the softmax gives when the running max starts at 0 instead of -inf, on every failing case"],
        ["exp overflowed", "subtract the row max first", "masked lanes loaded as 0", "were they written at all"],
    ),
    "07_max_from_zero": (
        "7",
        ["Yours is what the softmax gives when the running max starts at 0 instead of -inf, on every failing case"],
        ["exp overflowed", "subtract the row max first", "masked lanes loaded as 0", "were they written at all"],
    ),
    "11_splits_rounded_down": (
        "11",
        ["Yours is what the reference gives with only the keys 0..255 of the 300 (every head's last 44 left out)"],
        ["a tail that a block or its mask misses"],
    ),
    "10b_dk_times_log2e": (
        "10b",
        ["Your dk is exactly log2(e) x the expected dk (1.443x), every other output right, on every failing case"],
        ["A constant scale"],
    ),
    "10b_dk_without_scale": (
        "10b",
        ["Your dk is exactly 1/sm_scale x the expected dk (8x), every other output right, on every failing case"],
        ["A constant scale"],
    ),
}
EARLIER = {"9": ("--earlier", STEP_9A_KEY)}  # puzzle 9's submissions build on the answer key of step 9a


def diagnosis_report(tmp_path: Path, monkeypatch, capsys, name: str) -> str:
    number = {**DIAGNOSED, **PROVEN}[name][0]
    graded = submission(DIAGNOSES, name, tmp_path)
    return report(tmp_path, monkeypatch, capsys, number, graded, *EARLIER.get(number, ()))


# graded whole by `make test-all` only: their causes are proven in `make test` on the cases that show them by
# test_a_causal_boundary_off_by_one_is_proven_on_long_sequences_too (every failing case of theirs costs ~5-10 s here)
EXHAUSTIVE_DIAGNOSES = {"09_causal_one_key_past_diagonal", "09_causal_diagonal_left_out"}


@pytest.mark.slow
@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.exhaustive if n in EXHAUSTIVE_DIAGNOSES else ()) for n in DIAGNOSED]
)
def test_a_report_names_the_cause_its_evidence_proves_and_no_guess(name, tmp_path, monkeypatch, capsys):
    out = diagnosis_report(tmp_path, monkeypatch, capsys, name)
    _, said, not_said = DIAGNOSED[name]
    for text in said:
        assert text in out, out
    for text in not_said:
        assert text not in out, out


@pytest.mark.slow
@pytest.mark.exhaustive
@pytest.mark.parametrize("name", sorted(PROVEN))
def test_each_mistake_of_the_list_is_named_when_it_gives_every_failing_case(name, tmp_path, monkeypatch, capsys):
    out = diagnosis_report(tmp_path, monkeypatch, capsys, name)
    _, said, not_said = PROVEN[name]
    for text in said:
        assert text in out, out
    for text in not_said:
        assert text not in out, out


@pytest.mark.slow
@pytest.mark.exhaustive
def test_no_cause_is_named_from_a_case_another_mistake_gives_alike(tmp_path, monkeypatch, capsys):
    # without the mistake the kernel makes, its case of one row still fits "the diagonal key left out" (and two keys
    # left out), and the other failing cases fit nothing: no cause is named, what is known is said, with a command
    late = mistakes.BY_NAME["diagonal stage one block late"]
    monkeypatch.setattr(mistakes, "MISTAKES", tuple(m for m in mistakes.MISTAKES if m is not late))
    out = diagnosis_report(tmp_path, monkeypatch, capsys, "09_diagonal_stage_one_block_late")
    assert "instead of 0..i" not in out and "the diagonal key (query i's own) is left out" not in out, out
    assert (
        "No cause is proven: the reference with the causal boundary 1 key to the left of the diagonal gives the "
        "values of case 2, but not those of cases 4, 5, 6, 8, 9, 10, which fail too" in out
    ), out
    assert "such a case decides nothing alone" in out, out
    assert f"ARGS='--earlier {STEP_9A_KEY} --case 4 --seed 3'" in out, out


@pytest.mark.slow
def test_nan_from_small_scores_is_not_called_an_overflow(tmp_path, monkeypatch, capsys):
    # without the causal diagnoses (the mutation check), what is left is where, and that no exp overflowed
    monkeypatch.setattr(mistakes, "MISTAKES", ())
    monkeypatch.setattr(core, "fully_masked_rows", lambda ctx, exp: "")
    out = diagnosis_report(tmp_path, monkeypatch, capsys, "09_causal_diagonal_left_out")
    assert "Your output has NaN or inf although every input is finite, yet the exp of these scores cannot " in out
    assert "exp overflowed" not in out, out
    assert EVERY_FAILING_CASE_IS_CAUSAL in out, out


# each mistake on N = 130 (blocks that end past it) or N = 64 (a whole block); the other pairing by make test-all
BOUNDARY_CASES = [
    ("09_causal_diagonal_left_out", "0..i - 1", 3, ()),
    ("09_causal_one_key_past_diagonal", "0..i + 1", 5, ()),
    ("09_causal_diagonal_left_out", "0..i - 1", 5, pytest.mark.exhaustive),
    ("09_causal_one_key_past_diagonal", "0..i + 1", 3, pytest.mark.exhaustive),
]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "keys", "case"), [pytest.param(n, k, c, marks=m, id=f"{n}-case{c}") for n, k, c, m in BOUNDARY_CASES]
)
def test_a_causal_boundary_off_by_one_is_proven_on_long_sequences_too(name, keys, case, tmp_path):
    from checks import verdict as V
    from checks.engine.grade import grade

    puzzle = get_puzzle(9)
    graded, step = submission(DIAGNOSES, name, tmp_path), ROOT / STEP_9A_KEY
    verdict = grade(puzzle, graded, cases=[case], seed=3, timeout=120, time_it=False, earlier=step)
    text = V.format_verdict(verdict, puzzle.title)
    assert f"query row i sees the keys {keys} instead of 0..i" in text, text


@pytest.mark.slow
def test_a_broken_step_9a_is_named_when_the_failing_case_runs_only_its_code(tmp_path, monkeypatch, capsys):
    nine = tmp_path / "nine.py"
    nine.write_text(module_body(strip_markers(get_puzzle(9).solution.read_text(encoding="utf-8"))), encoding="utf-8")
    step = submission(DIAGNOSES, "09a_no_l_rescale", tmp_path)
    out = report(tmp_path, monkeypatch, capsys, "9", nine, "--earlier", str(step))
    given = shown(step)  # as messages show it: outside the course folder, as given
    assert (
        f"Case 1 launched only kernels of your step 9a code (`_attn_fwd`, in {given}): the mistake is in that code, "
        f"not in this puzzle's; check step 9a on its own first: make check PUZZLE=9a FILE={given} ARGS='--seed 3'."
        in out
    ), out
    assert f"make check PUZZLE=9 FILE={nine} ARGS='--earlier {given} --seed 3'" in out, out


@pytest.mark.parametrize(
    ("raised", "says"),
    [
        ("ValueError: arange's range must be a power of 2", "power of two"),
        ("ValueError: arange's arguments must be of type tl.constexpr", "tl.constexpr"),
        ("ValueError: Unsupported ptr type <['16'], fp32> in `tl.load`", "take pointers"),
        ("AssertionError: Input shapes should have M >= 16, N >= 16 and K >= 16", "at least 16"),
        ("AssertionError: Both operands must be same dtype. Got fp32 and fp16", "one dtype"),
        ("ValueError: Mask argument cannot be block type if pointer argument is not a block", "block of offsets"),
        ("RuntimeError: Cannot call @triton.jit'd outside of the scope of a kernel", "kernel[grid]"),
    ],
)
def test_common_triton_errors_each_get_one_sentence(raised, says):
    (line,) = triton_error_gloss(raised)
    assert line.startswith("What Triton's error means: ") and says in line and line.endswith(".")


def test_an_error_triton_does_not_give_gets_no_gloss():
    assert triton_error_gloss("ZeroDivisionError: division by zero") == []


def attention_call(yours: Callable[..., torch.Tensor], n: int = 9) -> SimpleNamespace:
    """A hand-made causal call of an attention forward whose output o is `yours` (a function of the inputs)."""
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, n, 16, generator=gen, dtype=torch.float64) for _ in range(3))
    inputs = {"q": q, "k": k, "v": v, "causal": True, "sm_scale": 0.25}
    o, _ = mistakes._shifted_attention(inputs, 0, padded=False)
    expected = SimpleNamespace(name="o", value=o, dims=("batch", "heads", "query rows", "head-dim columns"))
    puzzle = SimpleNamespace(tolerance_for=lambda name: (1e-6, 1e-6))
    return SimpleNamespace(inputs=inputs, expected=[expected], outputs=[yours(inputs, o)], puzzle=puzzle, case=Case())


def test_a_moved_causal_boundary_is_named_only_when_it_reproduces_the_output():
    left = attention_call(lambda inputs, o: mistakes._shifted_attention(inputs, -1, padded=False)[0])
    said = mistakes.causal_boundary(left, left.expected[0])
    assert "sees the keys 0..i - 1 instead of 0..i" in said and "Query row 0 then sees no key at all" in said
    assert "2 rows of o are NaN" in said  # row 0 of each of the two heads
    right = attention_call(lambda inputs, o: mistakes._shifted_attention(inputs, 1, padded=False)[0])
    assert "sees the keys 0..i + 1 instead of 0..i" in mistakes.causal_boundary(right, right.expected[0])
    scaled = attention_call(lambda inputs, o: 2 * o)
    assert mistakes.causal_boundary(scaled, scaled.expected[0]) == ""
    left.inputs["causal"] = False  # without the mask, no boundary to move
    assert mistakes.causal_boundary(left, left.expected[0]) == ""


def test_nan_rows_are_called_fully_masked_only_when_they_are_the_first_rows_of_every_head():
    def first_rows_nan(inputs, o):
        out = o.clone()
        out[:, :, :2] = float("nan")
        return out

    call = attention_call(first_rows_nan)
    assert "Exactly query rows 0..1 of every head are NaN" in core.fully_masked_rows(call, call.expected[0])

    def scattered_nan(inputs, o):
        out = o.clone()
        out[0, 0, 3, 5] = float("nan")
        return out

    call = attention_call(scattered_nan)
    assert core.fully_masked_rows(call, call.expected[0]) == ""


def test_rows_in_another_heads_place_are_named_as_such():
    from checks.engine.judging.rules.compare import compare

    expected = torch.randn(2, 3, 4, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    yours = expected.clone()
    yours[0, 1], yours[1, 0] = expected[1, 0], expected[0, 1]  # two heads' rows swapped
    dims = ("batch", "heads", "query rows", "head-dim columns")
    said = compare("o", yours, expected, 1e-6, 1e-6, dims)
    assert said is not None and said.cause
    assert (
        "2 wrong slice(s) along (query rows, head-dim columns) hold exactly the expected values of another one "
        "(yours at [0, 1] is the expected at [1, 0]; yours at [1, 0] is the expected at [0, 1])" in said.lines[0]
    ), said.lines
    yours[1, 0] = 0.0  # zeros match nothing: the rows of one head, not both, are in another's place
    assert "hold exactly the expected values" not in " ".join(compare("o", yours, expected, 1e-6, 1e-6, dims).lines)


def test_the_step_check_names_the_file_the_notebook_or_the_cells_the_step_came_from(tmp_path):
    from checks.engine.judging.wording import earlier_step_advice

    own, step = tmp_path / "nine.py", tmp_path / "nine_a.py"
    own.write_text("def flash_attention_v2_fwd(q):\n    return q\n", encoding="utf-8")
    step.write_text("def _attn_fwd(q):\n    return q\n", encoding="utf-8")
    notebook = "notebooks/09a_flash_attention_v2_fwd_noncausal.ipynb"
    for label, command in (
        ("your step 9a code in my_9a.py", "make check PUZZLE=9a FILE=my_9a.py ARGS='--seed 7'"),
        (f"your step 9a code in {notebook}", "make check PUZZLE=9a ARGS='--seed 7'"),
        ("your 9a cells", 'check("9a") in its notebook'),
    ):
        (line,) = earlier_step_advice("9a", 1, {"_attn_fwd"}, (own, step), label, 7)
        assert line.startswith("Case 2 launched only kernels of your step 9a code (`_attn_fwd`") and command in line
    assert earlier_step_advice("9a", 1, {"_attn_fwd", "flash_attention_v2_fwd"}, (own, step), "x", 7) == []
    assert earlier_step_advice("9a", 1, set(), (own, step), "x", 7) == []
