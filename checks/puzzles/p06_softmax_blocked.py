"""Puzzle 6: softmax over rows longer than a block, in three passes (max, sum, normalise).

The inputs, the reference and the baseline are puzzle 5's (see checks.puzzles.p05_softmax).
"""

from checks.puzzles.p05_softmax import baseline, make_inputs, reference, work

__all__ = ["baseline", "make_inputs", "reference", "work"]
