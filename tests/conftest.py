"""Shared helpers: the registry's puzzles and their known-wrong kernels, as pytest parameters."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from checks.registry import ROOT, Puzzle, load_puzzles

READY = [p for p in load_puzzles() if p.ready]


def wrong_kernels() -> list[tuple[Puzzle, Path]]:
    return [(p, f) for p in READY for f in sorted(p.wrong_dir.glob("*.py"))]


def expectation(path: Path) -> str:
    """The `expect:` line of a known-wrong kernel's docstring: text the rejection must contain."""
    match = re.search(r"^expect:\s*(.+)$", path.read_text(encoding="utf-8"), re.MULTILINE)
    assert match, f"{path.relative_to(ROOT)} has no 'expect:' line in its docstring"
    return match.group(1).strip()


def puzzle_params() -> list:
    return [pytest.param(p, id=p.stem) for p in READY]


def wrong_params() -> list:
    return [pytest.param(p, f, id=f"{p.stem}/{f.stem}") for p, f in wrong_kernels()]
