"""The course grader: `python -m checks N [--file F] [--solution] [--json]`.

Each submission runs in a child process (see `checks.sandbox`) so that a crash, a CUDA fault
or an endless loop becomes a verdict instead of taking the grader down.

Nothing is imported here eagerly: `python -m checks` first makes sure this Python has torch,
triton and pyyaml (see `checks.preflight`), and says which Python to use when it has not.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Puzzle", "get_puzzle", "load_puzzles"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from checks import registry

        return getattr(registry, name)
    raise AttributeError(f"module 'checks' has no attribute {name!r}")
