"""Puzzle 5: softmax over the last dimension of a 2-D float32 tensor whose rows fit one block.

Puzzles 6 and 7 grade the same function on rows longer than a block and reuse this module.
A case (checks.registry.Case) sets
    shape   [M, N]
    layout  contiguous | transposed | sliced   (the memory layout of x; checks.memory.layout_view)
    scale   the standard deviation of the random values (1.0e4 overflows a softmax without its max)
    fill    random | neg_inf | equal            (what is written over the random values, see below)
    shift   a constant added to every value afterwards (-1.0e4: rows with no value near 0)
    dtype   float32 (graded) | float16 (only for the GPU benchmark of the answer key)
"""

from __future__ import annotations

from typing import Any

import torch

from checks.memory import Arena, make_input
from checks.puzzles import BaselineFn, Expected, Work
from checks.registry import Case

NEG_INF = float("-inf")


def neg_inf_mask(shape: tuple[int, int], generator: torch.Generator, device: str) -> torch.Tensor:
    """Where to put -inf; every row keeps at least one finite entry.

    Rows take turns between three patterns: row % 3 == 0 has -inf everywhere but its last eighth
    (so whole blocks at the start of the row hold nothing else, as with a causal or padding mask),
    row % 3 == 1 has -inf at about 30% of its columns, scattered (never column 0), and
    row % 3 == 2 has -inf in its second half.
    """
    m, n = shape
    cols = torch.arange(n, device=device)[None, :]
    kind = (torch.arange(m, device=device) % 3)[:, None]
    leading = cols < n - max(1, n // 8)
    scattered = (torch.rand((m, n), generator=generator, device=device) < 0.3) & (cols > 0)
    trailing = cols >= n - n // 2
    return torch.where(kind == 0, leading, torch.where(kind == 1, scattered, trailing))


def make_inputs(case: Case, arena: Arena) -> dict[str, Any]:
    shape = tuple(case.shape)
    dtype = getattr(torch, case.dtype or "float32")
    x = make_input(arena, shape, dtype, "x", case.layout_of("x"), float(case.scale or 1.0))
    fill = case.fill or "random"
    # Written into x's own memory (a view into its guarded buffer) before the grader snapshots it.
    if fill == "neg_inf":
        x.masked_fill_(neg_inf_mask(shape, arena.generator, arena.device), NEG_INF)
    elif fill == "equal":
        x.copy_(x[:, :1].clone().expand(shape))  # every row holds one value, repeated
    elif fill != "random":
        raise ValueError(f"unknown fill {fill!r}")
    if case.shift:
        x.add_(float(case.shift))
    return {"x": x}


def reference(inputs: dict[str, Any]) -> list[Expected]:
    x = inputs["x"]
    return [Expected("out", torch.softmax(x.double(), dim=-1), x.dtype, ("rows", "columns"), contiguous=True)]


def baseline(inputs: dict[str, Any]) -> BaselineFn:
    return lambda: torch.softmax(inputs["x"], dim=-1)


def work(inputs: dict[str, Any]) -> Work:
    # The least any softmax must move: read x once, write the output once.
    x = inputs["x"]
    return Work(bytes=2 * x.numel() * x.element_size())
