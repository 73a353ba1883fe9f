"""Puzzle 4: the same product as puzzle 3 (float16, any sizes and strides), graded for speed on a GPU."""

from __future__ import annotations

from checks.puzzles.p03_matmul import baseline, make_inputs, reference, work

__all__ = ["baseline", "make_inputs", "reference", "work"]
