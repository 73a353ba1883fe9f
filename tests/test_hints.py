"""Hints: one more tier per call, remembered in the progress file, never more than exist."""

from __future__ import annotations

import ast
import dataclasses
import json
import re

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
            assert "make map" not in "\n".join(lines)  # the way to debug comes with the last hint
        elif call == total:
            assert "last hint" in lines[-2]
        else:
            assert "no more" in lines[-2]
        if call >= total:
            assert f"make map PUZZLE={WITH_HINTS.number}" in lines[-1] and "reference.ipynb" in lines[-1]
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


# -- a hint gives a nudge or an idea in words, never a line of code


def code_in(hint: str) -> list[str]:
    """The parts of a hint that read as code: a `tl.` expression anywhere; a backticked span that Python parses
    as an assignment, a call or a statement; in the prose, an assignment (`name = ...`) or a call of a dotted name
    (`triton.cdiv(...)`). A formula in words (exp(x - m), `offs_m < M`, `h // G`) is not code."""
    found = [f"tl. in {hint[max(0, m.start() - 20) : m.end() + 20]!r}" for m in re.finditer(r"\btl\.", hint)]
    spans = re.findall(r"`([^`]+)`", hint)
    for span in spans:
        try:
            tree = ast.parse(span)
        except SyntaxError:
            try:  # the head of a loop or a branch, without its body
                tree = ast.parse(f"{span}: pass")
            except SyntaxError:
                continue
        statements = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.NamedExpr, ast.Call, ast.For, ast.If, ast.While)
        if any(isinstance(node, statements) for node in ast.walk(tree)):
            found.append(f"code in backticks: `{span}`")
    prose = re.sub(r"`[^`]+`", "`…`", hint)
    found += [f"an assignment: {m.group(0)!r}" for m in re.finditer(r"\b[A-Za-z_]\w*(\[[^\]]*\])? = \S+", prose)]
    found += [f"a call: {m.group(0)!r}" for m in re.finditer(r"\b[A-Za-z_]\w*\.[A-Za-z_]\w*\(", prose)]
    return found


HINTS = [(p.number, i + 1, text) for p in load_puzzles() for i, text in enumerate(p.hints)]


@pytest.mark.parametrize(("number", "tier", "text"), HINTS, ids=[f"{n}-{t}" for n, t, _ in HINTS])
def test_no_hint_contains_a_line_of_code(number, tier, text):
    assert code_in(text) == [], f"hint {tier} of puzzle {number} gives code"


@pytest.mark.parametrize("puzzle", [p for p in load_puzzles() if p.hints], ids=lambda p: str(p.number))
def test_the_first_hint_of_every_puzzle_is_a_question(puzzle):
    assert puzzle.hints[0].rstrip().endswith("?")


@pytest.mark.parametrize(
    "text",
    [
        "`offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)` may run past n",
        "The grid is `(triton.cdiv(n, BLOCK_SIZE),)`: rounding up",
        "load them with other=0.0 and tl.where",
        "then mask = offsets < n_elements in every load",
        "use triton.next_power_of_2(N) lanes",
        "`show(9)` draws which tiles",
        "walk the row with `for start in range(0, n_cols, BLOCK_SIZE)` and a fixed BLOCK_SIZE",
    ],
)
def test_the_code_finder_finds_code(text):
    assert code_in(text)


@pytest.mark.parametrize(
    "text",
    [
        "Which rows of K does the output need, and which of those exist when N is not a power of two?",
        "block `pid` starts at element `pid * BLOCK_SIZE`; compare `offs_m < M`",
        "multiply the sum so far by exp(m - m_new) before adding the block's terms",
    ],
)
def test_the_code_finder_leaves_words_and_formulas_alone(text):
    assert code_in(text) == []


def test_hints_in_a_terminal_point_to_make_map_and_in_a_notebook_to_show(progress_file):
    last = len(WITH_HINTS.hints)
    for _ in range(last):
        terminal = hints.reveal(WITH_HINTS.number)
    assert f"make map PUZZLE={WITH_HINTS.number}" in terminal[-1] and "show(" not in terminal[-1]
    notebook = hints.reveal(WITH_HINTS.number, where=hints.NOTEBOOK)
    assert f"show({WITH_HINTS.literal})" in notebook[-1] and "make map" not in notebook[-1]
