"""Helpers the test modules share: the registry's puzzles and their known-wrong kernels as pytest parameters,
the right submissions in other styles, and switching a rule off for a mutation test."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest

from checks.authoring.wrong import known_wrong, name_of
from checks.registry import ROOT, Puzzle, load_puzzles

READY = [p for p in load_puzzles() if p.ready]


def wrong_kernels() -> list[tuple[Puzzle, Path]]:
    return [(p, f) for p in READY for f in known_wrong(p)]


def puzzle_params() -> list:
    return [pytest.param(p, id=p.stem) for p in READY]


def wrong_params() -> list:
    return [pytest.param(p, f, id=f"{p.stem}/{name_of(f)}") for p, f in wrong_kernels()]


def right_submissions() -> list[tuple[str, Path]]:
    """Each right submission in another style, with the puzzle its name starts with (`10a_x.py` is 10a)."""
    paths = sorted((ROOT / "tests" / "submissions" / "right").glob("*.py"))
    return [(re.match(r"\d+[a-z]?", p.name).group(), p) for p in paths]


def switch_off(monkeypatch: pytest.MonkeyPatch, rule: str) -> None:
    """The rulebook with `rule` finding nothing (for the test's duration): the mutation check."""
    from checks.engine.rules import rulebook

    entry = rulebook.RULES[rule]
    monkeypatch.setitem(rulebook.RULES, rule, dataclasses.replace(entry, check=lambda ctx, **params: None))


def run_rule(rule: str, ctx: Any, **params: Any) -> Any:
    """One rule on one call, through the rulebook (which names the problem after the rule)."""
    from checks.engine.rules import rulebook

    return rulebook.apply(rulebook.RULES[rule], ctx, params)
