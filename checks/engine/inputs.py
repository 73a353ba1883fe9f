"""A case's inputs, drawn from the seed: the same values in the grading process, in the grader, and when an
access log is recorded for a map."""

from __future__ import annotations

from typing import Any

import torch

from checks.engine.memory import Arena


def draw(spec: Any, case: dict[str, Any], seed: int, index: int, device: str) -> tuple[Arena, dict[str, Any]]:
    """The case's inputs (in a fresh arena on `device`): the same values wherever they are drawn."""
    gen = torch.Generator(device=device)
    gen.manual_seed(seed + index)
    arena = Arena(device, gen)
    return arena, spec.make_inputs(case, arena)


def draw_case(number: int | str, case_index: int = 0, seed: int = 1) -> tuple[Arena, dict[str, Any], list[str]]:
    """(arena, inputs, output names) of a puzzle's CPU case, drawn as the grader draws it."""
    from checks.puzzles import spec_module
    from checks.registry import get_puzzle

    puzzle = get_puzzle(number)
    spec = spec_module(puzzle)
    arena, inputs = draw(spec, puzzle.cases["cpu"][case_index], seed, case_index, "cpu")
    return arena, inputs, [e.name for e in spec.reference(inputs)]
