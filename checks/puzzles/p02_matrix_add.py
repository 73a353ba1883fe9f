"""Puzzle 2: a + b for 2-D float32 matrices in any memory layout; the result is contiguous."""

from __future__ import annotations

from typing import Any

import torch

from checks.memory import Arena, make_input
from checks.puzzles import BaselineFn, Expected, Work
from checks.registry import Case


def make_inputs(case: Case, arena: Arena) -> dict[str, Any]:
    shape = tuple(case.shape)
    return {
        "a": make_input(arena, shape, torch.float32, "a", case.layout_of("a")),
        "b": make_input(arena, shape, torch.float32, "b", case.layout_of("b")),
    }


def reference(inputs: dict[str, Any]) -> list[Expected]:
    a, b = inputs["a"], inputs["b"]
    return [Expected("out", a.double() + b.double(), torch.float32, ("rows", "columns"), contiguous=True)]


def baseline(inputs: dict[str, Any]) -> BaselineFn:
    return lambda: torch.add(inputs["a"], inputs["b"])


def work(inputs: dict[str, Any]) -> Work:
    return Work(bytes=3 * inputs["a"].numel() * 4)
