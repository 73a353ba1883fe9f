"""A case's inputs, drawn from the seed: the same values in the grading process, in the grader, and when an
access log is recorded for a map."""

from __future__ import annotations

from typing import Any

import torch

from checks.memory import Arena
from checks.registry import Case, Puzzle


def draw(
    spec: Any, case: Case, seed: int, index: int, device: str, data_seed: int | None = None
) -> tuple[Arena, dict[str, Any]]:
    """The case's inputs (in a fresh arena on `device`).

    The seed fixes the case's shapes, layouts and integer inputs (a page table); `data_seed` the values of its
    floating-point inputs (by default, the seed). The replay draws its values with a data seed no other process
    knows; the plan is recorded on draws with other data seeds and the same seed.
    """
    gen = torch.Generator(device=device)
    gen.manual_seed(seed + index)
    data = torch.Generator(device=device)
    data.manual_seed(((seed + index if data_seed is None else data_seed) + DATA_STREAM) % SEEDS)
    arena = Arena(device, gen, data_generator=data)
    return arena, spec.make_inputs(case, arena)


DATA_STREAM = 0x5EED_DA7A  # the data values come from a generator of their own, apart from the shapes'
SEEDS = 1 << 32  # a CPU generator keeps 32 bits of its seed: data seeds are taken modulo this
RECORDING_DRAWS = (0x1000_0000, 0x2000_0000)  # data seeds of the two draws a plan is recorded on, added to the seed
DEBUGGING_DRAW = 0x3000_0000  # added to the seed: the replay's data seed in a debugging run (--seed)


def debugging_data_seed(seed: int) -> int:
    """The replay's data seed in a debugging run: fixed by the seed, so the same seed gives the same data values.

    Case i's values come from it + i, which no recording draw of any case has (they differ by at least 2^28)."""
    return (seed + DEBUGGING_DRAW) % SEEDS


def secret_data_seed(seed: int, count: int) -> int:
    """A data seed for the replay that neither recording draw of any of `count` cases can have."""
    import secrets

    while True:
        found = secrets.randbelow(SEEDS)
        recorded = {(seed + i + d) % SEEDS for i in range(count) for d in RECORDING_DRAWS}
        if not {(found + i) % SEEDS for i in range(count)} & recorded:
            return found


def draw_case(puzzle: Puzzle, case_index: int = 0, seed: int = 1) -> tuple[Arena, dict[str, Any], list[str]]:
    """(arena, inputs, output names) of a puzzle's CPU case, drawn as the grader draws it."""
    from checks.puzzles import spec_module

    spec = spec_module(puzzle)
    arena, inputs = draw(spec, puzzle.cases.cpu[case_index], seed, case_index, "cpu")
    return arena, inputs, [e.name for e in spec.reference(inputs)]
