"""Puzzle 16b: c = a @ b on Hopper in Gluon (TMA loads, asynchronous warpgroup MMA), float16 in, float32 accumulation.

A case gives M, N, K (K and N multiples of 8: a TMA descriptor's row stride is a multiple of 16 bytes) and an
`offset`, as puzzle 3's; the inputs are contiguous. The reference, baseline and work are puzzle 3's.
"""

from __future__ import annotations

from typing import Any

import torch

from checks.memory import Arena, make_input
from checks.puzzles.p03_matmul import baseline, reference, work
from checks.registry import Case

__all__ = ["baseline", "make_inputs", "reference", "work"]


def make_inputs(case: Case, arena: Arena) -> dict[str, Any]:
    a = make_input(arena, (case.M, case.K), torch.float16, "a")
    b = make_input(arena, (case.K, case.N), torch.float16, "b")
    offset = case.offset or 0.0  # every product positive on average: a float16 accumulator loses digits
    a.add_(offset)
    b.add_(offset)
    return {"a": a, "b": b}
