"""Shared helpers: the registry's puzzles and their known-wrong kernels, as pytest parameters."""

from __future__ import annotations

from pathlib import Path

import pytest

from checks.answer_key import expectations
from checks.registry import ROOT, Puzzle, load_puzzles
from checks.wrong import known_wrong, name_of

READY = [p for p in load_puzzles() if p.ready]


def wrong_kernels() -> list[tuple[Puzzle, Path]]:
    return [(p, f) for p in READY for f in known_wrong(p)]


def expectation(path: Path) -> list[str]:
    """The texts one of which the rejection of a known-wrong kernel must contain (its `expect:` line)."""
    expected = expectations(path)
    assert expected, f"{path.relative_to(ROOT)} has no 'expect:' line in its docstring"
    return expected


def puzzle_params() -> list:
    return [pytest.param(p, id=p.stem) for p in READY]


def wrong_params() -> list:
    return [pytest.param(p, f, id=f"{p.stem}/{name_of(f)}") for p, f in wrong_kernels()]
