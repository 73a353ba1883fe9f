"""Puzzle 1: out = x + y for 1-D float32 vectors of any length."""

from __future__ import annotations

from typing import Any

import torch

from checks.memory import Arena, make_input
from checks.puzzles import BaselineFn, Expected, Work
from checks.registry import Case


def make_inputs(case: Case, arena: Arena) -> dict[str, Any]:
    n = case.n
    return {"x": make_input(arena, (n,), torch.float32, "x"), "y": make_input(arena, (n,), torch.float32, "y")}


def reference(inputs: dict[str, Any]) -> list[Expected]:
    x, y = inputs["x"], inputs["y"]
    return [Expected("out", x.double() + y.double(), torch.float32, ("elements",))]


def baseline(inputs: dict[str, Any]) -> BaselineFn:
    return lambda: torch.add(inputs["x"], inputs["y"])


def work(inputs: dict[str, Any]) -> Work:
    return Work(bytes=3 * inputs["x"].numel() * 4)
