"""Puzzle 3: c = a @ b for float16 matrices of any size and layout, accumulated in float32."""

from __future__ import annotations

from typing import Any

import torch

from checks.memory import Arena, make_input
from checks.puzzles import BaselineFn, Expected, Work
from checks.registry import Case


def make_inputs(case: Case, arena: Arena) -> dict[str, Any]:
    m, n, k = case.M, case.N, case.K
    a = make_input(arena, (m, k), torch.float16, "a", case.layout_of("a"))
    b = make_input(arena, (k, n), torch.float16, "b", case.layout_of("b"))
    # An offset makes every product positive on average, so sums grow with K: this is where a
    # float16 accumulator visibly loses digits.
    offset = case.offset or 0.0
    a.add_(offset)
    b.add_(offset)
    return {"a": a, "b": b}


def reference(inputs: dict[str, Any]) -> list[Expected]:
    a, b = inputs["a"], inputs["b"]
    # float64 on the CPU is exact enough; on a GPU float32 is (and float64 matmul is slow there)
    wide = torch.float64 if a.device.type == "cpu" else torch.float32
    return [Expected("c", a.to(wide) @ b.to(wide), torch.float16, ("rows", "columns"))]


def baseline(inputs: dict[str, Any]) -> BaselineFn:
    return lambda: torch.matmul(inputs["a"], inputs["b"])


def work(inputs: dict[str, Any]) -> Work:
    (m, k), n = inputs["a"].shape, inputs["b"].shape[1]
    return Work(bytes=2 * (m * k + k * n + m * n), flops=2.0 * m * n * k)
