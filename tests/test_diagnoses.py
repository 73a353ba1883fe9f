"""Diagnoses that prove themselves: each known-wrong submission in tests/submissions/diagnoses/ is graded in the
interpreter, and its report must name the cause the evidence proves (the reference recomputed with the mistake, or
the interpreter's access log), and must not name the causes it used to guess at."""

from __future__ import annotations

from pathlib import Path

import pytest

from checks import cli
from checks.authoring.stubs import module_body, strip_markers
from checks.engine.judging.wording import triton_error_gloss
from checks.learner import progress
from checks.registry import ROOT, get_puzzle

DIAGNOSES = ROOT / "tests" / "submissions" / "diagnoses"
STEP_9A_KEY = "solutions/09a_flash_attention_v2_fwd_noncausal.py"


def report(tmp_path: Path, monkeypatch, capsys, number: str, file: Path, *args: str) -> str:
    """The report of `make check PUZZLE=number FILE=file ARGS='args --seed 3'`, graded in this process."""
    monkeypatch.setenv(progress.ENV_FILE, str(tmp_path / "progress.json"))
    monkeypatch.chdir(ROOT)
    assert cli.main([number, "--file", str(file), *args, "--seed", "3"]) == 1
    return capsys.readouterr().out


@pytest.mark.slow
def test_a_broken_step_9a_is_named_when_the_failing_case_runs_only_its_code(tmp_path, monkeypatch, capsys):
    nine = tmp_path / "nine.py"
    nine.write_text(module_body(strip_markers(get_puzzle(9).solution.read_text(encoding="utf-8"))), encoding="utf-8")
    step = DIAGNOSES / "09a_no_l_rescale.py"
    out = report(tmp_path, monkeypatch, capsys, "9", nine, "--earlier", str(step))
    shown = "tests/submissions/diagnoses/09a_no_l_rescale.py"
    assert (
        f"Case 1 launched only kernels of your step 9a code (`_attn_fwd`, in {shown}): the mistake is in that code, "
        f"not in this puzzle's; check step 9a on its own first: make check PUZZLE=9a FILE={shown} ARGS='--seed 3'."
        in out
    ), out
    assert f"make check PUZZLE=9 FILE={nine} ARGS='--earlier {shown} --seed 3'" in out, out


@pytest.mark.slow
def test_an_off_by_one_store_mask_is_told_what_it_lets_through(tmp_path, monkeypatch, capsys):
    out = report(tmp_path, monkeypatch, capsys, "1", DIAGNOSES / "01_mask_off_by_one.py")
    assert (
        "your store lets exactly one element past the end through, so its mask or bound is off by one "
        "(offsets <= n where offsets < n belongs): fix that comparison." in out
    ), out
    assert "give that store a mask" not in out, out


@pytest.mark.slow
def test_swapped_batch_and_head_indices_are_told_their_rows_land_elsewhere(tmp_path, monkeypatch, capsys):
    out = report(tmp_path, monkeypatch, capsys, "8a", DIAGNOSES / "08a_batch_head_swapped.py")
    assert (
        "272 elements past its end, starting right after its last element; that is exactly 1 whole slice of o along "
        "(query rows, head-dim columns), 17 x 16 elements each, and 1 such slice of o ([0, 1] along batch, heads) no "
        "kernel wrote: a program's rows landed past the end instead of in their own place, which a mask would only "
        "hide." in out
    ), out
    assert "batch = pid // H, head = pid % H" in out, out
    assert "give that store a mask" not in out, out


@pytest.mark.slow
def test_a_common_triton_error_is_glossed_beside_the_raw_one(tmp_path, monkeypatch, capsys):
    out = report(tmp_path, monkeypatch, capsys, "2", DIAGNOSES / "02_store_mask_wrong_shape.py")
    assert "Your code raised ValueError: Cannot make_shape_compatible: incompatible dimensions at index 1" in out
    assert (
        "What Triton's error means: two blocks in one operation have shapes that do not fit together (a mask, "
        "offsets or values of another shape than the pointers they go with" in out
    ), out


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
