"""Puzzle 16a: a copy of a float16 matrix through shared memory by the Tensor Memory Accelerator (Hopper, Gluon).

A case gives M and N (N a multiple of 8: a TMA descriptor's row stride is a multiple of 16 bytes). The reference is
the input itself: a copy is exact, so the tolerance is zero.
"""

from __future__ import annotations

from typing import Any

import torch

from checks.memory import Arena, make_input
from checks.puzzles import BaselineFn, Expected, Work
from checks.registry import Case


def make_inputs(case: Case, arena: Arena) -> dict[str, Any]:
    return {"x": make_input(arena, (case.M, case.N), torch.float16, "x")}


def reference(inputs: dict[str, Any]) -> list[Expected]:
    x = inputs["x"]
    return [Expected("out", x.float(), torch.float16, ("rows", "columns"), contiguous=True)]


def baseline(inputs: dict[str, Any]) -> BaselineFn:
    x = inputs["x"]
    out = torch.empty_like(x)
    return lambda: out.copy_(x)


def work(inputs: dict[str, Any]) -> Work:
    return Work(bytes=2 * inputs["x"].numel() * inputs["x"].element_size())
