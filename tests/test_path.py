"""The path a learner walks: no graded step asks too much at once, and every `tl.*` name an answer key
uses is named in its own lesson or an earlier one (in puzzles.yaml's course order)."""

from __future__ import annotations

import re

import pytest

from checks.engine.submission import cell_source, graded_cells
from checks.registry import Puzzle, load_puzzles

MOST_LINES = 60  # the most lines a graded step asks for: the sum of its "FILL ME IN (roughly N lines)"
TL_NAME = re.compile(r"(?<![\w.])tl\.([a-z_][a-z_0-9]*(?:\.[a-z_][a-z_0-9]*)?)")
# Types and type-like names, written in signatures and casts rather than taught as functions.
NOT_FUNCTIONS = {"constexpr", "tensor", "dtype", "pointer_type", "block_type"} | {
    f"{kind}{bits}" for kind, sizes in (("float", (16, 32, 64)), ("bfloat", (16,)), ("int", (1, 8, 16, 32, 64)),
                                        ("uint", (8, 16, 32, 64))) for bits in sizes
}  # fmt: skip


def lines_to_write(cells: list[str]) -> int:
    """The lines a step asks for: the sum of the "FILL ME IN (roughly N lines)" of its graded cells."""
    return sum(int(n) for cell in cells for n in re.findall(r"FILL ME IN \(roughly (\d+) lines?\)", cell))


def tl_names(text: str) -> set[str]:
    """The `tl.*` functions a text names (`tl.math.exp2` as `math.exp2`), types left out."""
    return {name for name in TL_NAME.findall(text) if name not in NOT_FUNCTIONS}


def used_before_introduced(steps: list[tuple[str, str, str]]) -> dict[str, list[str]]:
    """For (step, lesson text, answer key text) in course order: the names each key uses that neither its
    lesson nor an earlier one names."""
    taught: set[str] = set()
    found = {}
    for step, lesson, key in steps:
        taught |= tl_names(lesson)
        if missing := sorted(tl_names(key) - taught):
            found[step] = missing
    return found


def ready() -> list[Puzzle]:
    return [p for p in load_puzzles() if p.ready]


def test_the_helpers_see_what_they_must():
    assert lines_to_write(["# FILL ME IN (roughly 12 lines)\n    # FILL ME IN (roughly 1 line)", "x = 1"]) == 13
    assert tl_names("tl.load(p) + tl.math.exp2(x); tl.float32; a.tl.b") == {"load", "math.exp2"}
    steps = [("1", "`tl.load`", "tl.load(p)"), ("2", "nothing new", "tl.load(tl.trans(k))")]
    assert used_before_introduced(steps) == {"2": ["trans"]}
    assert used_before_introduced([("2", "`tl.trans`", "tl.trans(k)"), ("3", "", "tl.trans(k)")]) == {}


@pytest.mark.parametrize("puzzle", ready(), ids=lambda p: p.stem)
def test_no_step_asks_more_than_sixty_lines(puzzle: Puzzle):
    import json

    cells = [cell_source(c) for c in json.loads(puzzle.notebook.read_text(encoding="utf-8"))["cells"]]
    asked = lines_to_write(graded_cells(cells, puzzle.number))
    assert 0 < asked <= MOST_LINES, f"step {puzzle.number} asks for {asked} lines; split it or give more code"


def test_every_tl_name_a_key_uses_is_introduced_by_then():
    steps = [
        (p.number, p.notebook_source.read_text(encoding="utf-8"), p.solution.read_text(encoding="utf-8"))
        for p in ready()
    ]
    missing = used_before_introduced(steps)
    assert not missing, "names an answer key uses before its lesson or an earlier one names them: " + "; ".join(
        f"{step}: {', '.join(names)}" for step, names in missing.items()
    )
