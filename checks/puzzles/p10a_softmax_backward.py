"""Step 10a: the backward pass of a row softmax, dx = y * (dy - rowsum(dy * y)).

A case (checks.registry.Case) sets
    shape      [M, N], N <= 16384 (a row fits one block)
    layout_y   contiguous | transposed | sliced   (the memory layout of y; checks.memory.layout_view)
    layout_dy  the same for dy
    scale      the standard deviation of the logits y is the softmax of (10: rows close to one-hot)
    fill       random | neg_inf   (neg_inf: logits masked as in puzzle 5, so y holds exact zeros)
"""

from __future__ import annotations

from typing import Any

import torch

from checks.memory import Arena, make_input
from checks.puzzles import BaselineFn, Expected, Work
from checks.puzzles.p05_softmax import NEG_INF, neg_inf_mask
from checks.registry import Case


def make_inputs(case: Case, arena: Arena) -> dict[str, Any]:
    shape = tuple(case.shape)
    y = make_input(arena, shape, torch.float32, "y", case.layout_of("y"), float(case.scale or 1.0))
    fill = case.fill or "random"
    if fill == "neg_inf":
        y.masked_fill_(neg_inf_mask(shape, arena.generator, arena.device), NEG_INF)
    elif fill != "random":
        raise ValueError(f"unknown fill {fill!r}")
    # y is drawn as logits, then turned into their softmax in its own (guarded) memory.
    y.copy_(torch.softmax(y.double(), dim=-1).float())
    dy = make_input(arena, shape, torch.float32, "dy", case.layout_of("dy"))
    return {"y": y, "dy": dy}


def reference(inputs: dict[str, Any]) -> list[Expected]:
    y, dy = inputs["y"].double(), inputs["dy"].double()
    delta = (dy * y).sum(dim=-1, keepdim=True)  # (M, 1)
    return [Expected("dx", y * (dy - delta), torch.float32, ("rows", "columns"), contiguous=True)]


def baseline(inputs: dict[str, Any]) -> BaselineFn:
    """What autograd runs for the backward of torch.softmax."""
    y, dy = inputs["y"], inputs["dy"]
    return lambda: torch.ops.aten._softmax_backward_data(dy, y, -1, y.dtype)


def work(inputs: dict[str, Any]) -> Work:
    # The least it must move: read y and dy once, write dx once.
    y = inputs["y"]
    return Work(bytes=3 * y.numel() * y.element_size())
