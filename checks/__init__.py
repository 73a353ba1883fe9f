"""The course grader: `python -m checks N [--file F] [--solution] [--json]`.

Each submission runs in a child process (see `checks.sandbox`) so that a crash, a CUDA fault
or an endless loop becomes a verdict instead of taking the grader down.
"""

from checks.registry import Puzzle, get_puzzle, load_puzzles

__all__ = ["Puzzle", "get_puzzle", "load_puzzles"]
