"""The registry agrees with the contract, and every ready puzzle has all of its parts."""

from __future__ import annotations

import ast

import pytest

from checks.puzzles import spec_module
from checks.registry import ROOT, get_puzzle, load_puzzles
from checks.source import BEGIN, END, make_stub
from checks.wrong import known_wrong
from tests.conftest import puzzle_params

# The contract's table (shared/course-contract.md): number, slug, the function the learner defines.
CONTRACT = [
    (1, "vector_add", "vector_add"),
    (2, "matrix_add", "matrix_add"),
    (3, "matmul", "matmul"),
    (4, "matmul_fast", "matmul_fast"),
    (5, "softmax", "softmax"),
    (6, "softmax_blocked", "softmax_blocked"),
    (7, "softmax_online", "softmax_online"),
    (8, "flash_attention_v1", "flash_attention_v1"),
    (9, "flash_attention_v2_fwd", "flash_attention_v2_fwd"),
    (10, "flash_attention_v2_bwd", "flash_attention_v2_bwd"),
]


def test_registry_matches_the_contract():
    got = [(p.number, p.slug, p.name) for p in load_puzzles()]
    assert got == CONTRACT


def test_paths_follow_the_numbering():
    for p in load_puzzles():
        assert p.notebook == ROOT / "notebooks" / f"{p.stem}.ipynb"
        assert p.solution == ROOT / "solutions" / f"{p.stem}.py"


@pytest.mark.parametrize("puzzle", puzzle_params())
def test_ready_puzzle_has_every_part(puzzle):
    assert puzzle.solution.exists() and puzzle.notebook.exists() and puzzle.notebook_source.exists()
    module = spec_module(puzzle)
    for name in ("make_inputs", "reference", "baseline", "work"):
        assert callable(getattr(module, name)), f"checks/puzzles module of {puzzle.stem} lacks {name}"
    assert len(known_wrong(puzzle)) >= 6, "at least six known-wrong kernels per puzzle"
    assert 2 <= len(puzzle.hints) <= 3
    assert puzzle.cases.get("cpu") and puzzle.cases.get("gpu")
    assert puzzle.bench, "a GPU timing case"
    assert puzzle.tolerance, "tolerances live in puzzles.yaml"


@pytest.mark.parametrize("puzzle", puzzle_params())
def test_solution_defines_the_contract_names_and_marks_the_learner_part(puzzle):
    source = puzzle.solution.read_text(encoding="utf-8")
    tree = ast.parse(source)
    defined = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    assert set(puzzle.defines) <= defined
    assert source.count(BEGIN) == source.count(END) >= 1
    stub = make_stub(source, puzzle.number)
    compile(stub, str(puzzle.solution), "exec")  # the learner's stub must at least parse
    assert "FILL ME IN (roughly" in stub and BEGIN not in stub


def test_unknown_puzzle_is_a_clear_error():
    with pytest.raises(LookupError, match="There is no puzzle 11"):
        get_puzzle(11)


@pytest.mark.parametrize("puzzle", puzzle_params())
def test_every_edited_answer_key_still_applies_and_differs(puzzle):
    from checks.wrong import EDIT_SUFFIX, answer_key_body, source_of

    for path in known_wrong(puzzle):
        source = source_of(puzzle, path)  # raises when an edit no longer finds its text
        compile(source, str(path), "exec")
        if path.name.endswith(EDIT_SUFFIX):
            assert answer_key_body(puzzle) not in source, f"{path.name} must change the answer key"


def test_an_edit_that_no_longer_applies_says_so():
    from checks.wrong import EditError, apply_edits

    with pytest.raises(EditError, match="exactly once"):
        apply_edits("a = 1\n", [{"old": "b = 2\n", "new": ""}], "x.edit.yaml")
