"""Puzzle 4: the same product as puzzle 3 (float16, any sizes and strides), graded for speed on a GPU."""

from __future__ import annotations

from typing import Any

from checks.puzzles.p03_matmul import baseline, make_inputs, reference, work

__all__ = ["baseline", "make_inputs", "method_cases", "reference", "work"]

# puzzles.yaml's wide and tall interpreter cases tell the launch orders apart at tiles up to this many rows or columns
ORDER_SHOWS_UP_TO = 64


def method_cases(tile: int) -> list[dict[str, Any]]:
    """Interpreter cases that tell the launch orders apart at tiles of up to `tile` rows and columns (the largest block
    size of a config judged): a wide grid and a tall one of at least 2 x 16 tiles; none where the puzzle's own cases
    already tell them apart."""
    if tile <= ORDER_SHOWS_UP_TO:
        return []
    common = {"K": 40, "layout_a": "contiguous", "layout_b": "contiguous"}
    return [
        {"M": 2 * tile, "N": 16 * tile, **common, "note": f"wide: row-major order shows, at tiles up to {tile}"},
        {"M": 16 * tile, "N": 2 * tile, **common, "note": f"tall: column-major order shows, at tiles up to {tile}"},
    ]
