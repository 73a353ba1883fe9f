"""Hints: one more tier per call, remembered in the progress file, never more than exist."""

from __future__ import annotations

import dataclasses
import json

import pytest

from checks.learner import hints, progress
from checks.learner.notebook import hint as notebook_hint
from checks.registry import load_puzzles

WITH_HINTS = next(p for p in load_puzzles() if len(p.hints) >= 2)


@pytest.fixture
def progress_file(tmp_path, monkeypatch):
    path = tmp_path / "progress.json"
    monkeypatch.setenv(progress.ENV_FILE, str(path))
    return path


def shown_tiers(lines: list[str], total: int) -> list[int]:
    return [k for k in range(1, total + 1) if any(f"Hint {k} of {total}:" in line for line in lines)]


def test_each_call_reveals_one_more_tier_and_stops_at_the_last(progress_file):
    total = len(WITH_HINTS.hints)
    for call in range(1, total + 3):
        lines = hints.reveal(WITH_HINTS.number)
        expected = min(call, total)
        assert shown_tiers(lines, total) == list(range(1, expected + 1))
        assert WITH_HINTS.hints[expected - 1] in "\n".join(lines)
        if call < total:
            assert f"hint {call + 1} of {total}" in lines[-1]
            assert "show(" not in "\n".join(lines)  # the way to debug comes with the last hint
        elif call == total:
            assert "last hint" in lines[-2]
        else:
            assert "no more" in lines[-2]
        if call >= total:
            assert f"show({WITH_HINTS.literal})" in lines[-1] and "reference.ipynb" in lines[-1]
    stored = json.loads(progress_file.read_text(encoding="utf-8"))
    assert stored["puzzles"][str(WITH_HINTS.number)]["hints_shown"] == total


def test_terminal_and_notebook_share_the_count(progress_file, capsys):
    notebook_hint(WITH_HINTS.number)
    assert "Hint 1 of" in capsys.readouterr().out
    assert hints.main([str(WITH_HINTS.number)]) == 0
    out = capsys.readouterr().out
    assert f"Hint 2 of {len(WITH_HINTS.hints)}:" in out


def test_reset_starts_over(progress_file, capsys):
    hints.reveal(WITH_HINTS.number)
    hints.reveal(WITH_HINTS.number)
    assert hints.main([str(WITH_HINTS.number), "--reset"]) == 0
    assert shown_tiers(hints.reveal(WITH_HINTS.number), len(WITH_HINTS.hints)) == [1]


def test_a_puzzle_without_hints_says_so_in_a_sentence(progress_file, monkeypatch):
    bare = dataclasses.replace(WITH_HINTS, hints=())
    monkeypatch.setattr(hints, "get_puzzle", lambda number: bare)
    lines = hints.reveal(bare.number)
    assert len(lines) == 1
    assert "has no hints yet" in lines[0] and lines[0].endswith(".")
    assert not progress_file.exists()


def test_unknown_puzzle_is_a_usage_error(progress_file, capsys):
    assert hints.main(["99"]) == 2
    assert "There is no puzzle 99" in capsys.readouterr().err


def test_hints_survive_a_damaged_progress_file(progress_file, capsys):
    progress_file.write_text("{ this is not json", encoding="utf-8")
    lines = hints.reveal(WITH_HINTS.number)
    assert shown_tiers(lines, len(WITH_HINTS.hints)) == [1]
    assert "damaged" in capsys.readouterr().err
    assert json.loads(progress_file.read_text(encoding="utf-8"))["puzzles"][str(WITH_HINTS.number)]["hints_shown"] == 1


def test_under_pytest_without_a_file_nothing_touches_the_course_root(monkeypatch):
    monkeypatch.delenv(progress.ENV_FILE, raising=False)
    assert progress.progress_file() is None  # PYTEST_CURRENT_TEST is set: progress lives in memory
    before = progress.DEFAULT_FILE.read_bytes() if progress.DEFAULT_FILE.exists() else None
    hints.reveal(WITH_HINTS.number)
    after = progress.DEFAULT_FILE.read_bytes() if progress.DEFAULT_FILE.exists() else None
    assert before == after
