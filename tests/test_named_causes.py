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
