"""Puzzle 7: online softmax over rows longer than a block, in two passes (online max and sum, then normalise).

The inputs, the reference and the baseline are puzzle 5's (see checks.puzzles.p05_softmax).
"""

from checks.puzzles.p05_softmax import baseline, make_inputs, reference, work

__all__ = ["baseline", "make_inputs", "reference", "work"]
