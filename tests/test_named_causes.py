"""A report that names a cause says nothing beside it that points elsewhere. Each test grades a known-wrong
kernel in the interpreter."""

from __future__ import annotations

import pytest

from checks import cli
from checks.authoring.wrong import source_of
from checks.learner import progress
from checks.registry import get_puzzle

pytestmark = pytest.mark.slow


def grade_wrong(tmp_path, monkeypatch, capsys, number: str, name: str, seed: int = 3) -> str:
    monkeypatch.setenv(progress.ENV_FILE, str(tmp_path / "progress.json"))
    puzzle = get_puzzle(number)
    submission = tmp_path / f"{name}.py"
    submission.write_text(source_of(puzzle, puzzle.wrong_dir / f"{name}.edit.yaml"), encoding="utf-8")
    assert cli.main([number, "--file", str(submission), "--seed", str(seed)]) == 1
    return capsys.readouterr().out


def test_sm_scale_left_out_gets_no_case_split(tmp_path, monkeypatch, capsys):
    out = grade_wrong(tmp_path, monkeypatch, capsys, "8a", "missing_scale")
    assert "sm_scale is left out" in out
    assert "Every failing case has" not in out  # H=2 fails only because the H=1 and H=3 cases have sm_scale=1


def grade_one_case(number: str, name: str, tmp_path, case: int = 0):
    """The verdict on one case of a known-wrong kernel, and its report."""
    from checks import verdict as V
    from checks.engine.grade import grade

    puzzle = get_puzzle(number)
    submission = tmp_path / f"{name}.py"
    submission.write_text(source_of(puzzle, puzzle.wrong_dir / f"{name}.edit.yaml"), encoding="utf-8")
    verdict = grade(puzzle, submission, cases=[case], seed=3, timeout=120, time_it=False)
    return verdict, V.format_verdict(verdict, puzzle.title)


def test_values_computed_from_unwritten_scratch_are_not_called_never_written(tmp_path):
    # 13's merge over all MAX_SPLITS: every output element is stored, from partial results no split wrote
    verdict, report = grade_one_case("13", "merge_all_splits", tmp_path)
    assert verdict.rule == "values"
    assert "were never written" not in report, report
    assert "o: 512 of 768 elements were computed from memory no kernel wrote" in report, report
    assert "lse also wrong: 8 of 12 elements were computed from memory no kernel wrote" in report, report
    assert "a (12, 2, 64) float32 tensor you allocated (read by `_attn_decode_merge`)" in report, report


def test_keys_read_past_seq_lens_are_named_before_the_wrong_values(tmp_path):
    verdict, report = grade_one_case("13", "mask_off_by_one", tmp_path)
    assert verdict.rule == "values"
    assert "your kernels read keys past seq_lens (the rule pages_in_table)" in report, report
    assert "listed in block_table, past seq_lens there" in report, report


def test_padded_keys_scored_zero_are_proven_so_and_replace_the_one_factor_per_row_shape(tmp_path):
    verdict, report = grade_one_case("8a", "no_key_mask", tmp_path)
    assert verdict.rule == "values"
    assert (
        "Yours is what the reference gives when the 28 lanes of the last key block past N count with the score 0"
        in report
    ), report
    assert "get the score 0 instead of -inf" in report, report
    assert "constant along head-dim columns and differs between query rows" not in report, report  # a guess


def test_a_write_outside_names_the_kernel_the_line_and_the_argument(tmp_path):
    from checks.cli import picture_advice

    verdict, report = grade_one_case("12", "padding_rows_stored", tmp_path)
    assert verdict.rule == "no_write_outside"
    source = (tmp_path / "padding_rows_stored.py").read_text(encoding="utf-8").splitlines()
    line = next(i for i, text in enumerate(source, 1) if "tl.store(o_part_ptr + parts[:, None]" in text)
    named = f"Your kernel `_attn_decode_split` (line {line}, the store through its argument `o_part_ptr`)"
    assert named in report, report
    advice = picture_advice(verdict, get_puzzle("12").stem)
    assert "where the output is wrong" not in advice and "past the tensor's end" in advice


def test_a_merge_wrong_only_where_a_sequence_was_split_is_named(tmp_path, monkeypatch):
    # case 1 has sequences of 300, 45 and 130 keys: the two short ones fit one split each, whose heads come out right
    verdict, report = grade_one_case("13", "merge_weights_equal", tmp_path)
    assert verdict.rule == "values", report
    assert "only the heads whose keys several programs read are wrong" in report
    assert "every head that one program read whole (8) is right: the merge of the splits is wrong" in report
    from checks.engine.judging.rules import decoding

    monkeypatch.setattr(decoding, "wrong_only_where_split", lambda ctx, mismatch: None)  # the mutation check
    (again := tmp_path / "again").mkdir()
    _, plain = grade_one_case("13", "merge_weights_equal", again)
    assert "the merge of the splits is wrong" not in plain
