"""Before grading: can this Python grade at all? It needs torch, triton and pyyaml.

Run with a Python that lacks them (the system's `python3` beside the course's `.venv`), the
grading process would die while starting and the report would blame the learner's code. This
module looks for the packages without importing them (it uses only the standard library), so
`python -m checks` can stop first with a sentence naming what is missing and which Python to use.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
NEEDED = (("torch", "torch"), ("triton", "triton"), ("yaml", "pyyaml"))  # (module, package)


def _spec(name: str) -> object | None:
    try:
        return importlib.util.find_spec(name)
    except (ImportError, ValueError):  # a broken or half-removed install
        return None


def missing(find: Callable[[str], object | None] = _spec) -> list[str]:
    """The packages the grader needs that this Python cannot import."""
    return [package for module, package in NEEDED if find(module) is None]


def advice(absent: list[str], argv: list[str], root: Path = ROOT) -> str:
    """One message: what is missing from which Python, and the command to use instead."""
    venv = root / ".venv" / "bin" / "python"
    args = " ".join(argv) if argv else "N"
    names = absent[0] if len(absent) == 1 else ", ".join(absent[:-1]) + " or " + absent[-1]
    head = f"This Python ({sys.executable}) cannot grade: it has no {names}, which the grader needs."
    in_venv = Path(sys.prefix).resolve() == (root / ".venv").resolve()  # its python is often a symlink
    if venv.exists() and not in_venv:
        return (
            f"{head} Use the course's own Python instead: `.venv/bin/python -m checks {args}` "
            "(or `source .venv/bin/activate` first), or `make check PUZZLE=N`, which picks it for you."
        )
    return (
        f"{head} Run `make check PUZZLE=N` once from the course folder: it sets up .venv with them "
        f"and grades; afterwards `.venv/bin/python -m checks {args}` works too."
    )


def ensure(argv: list[str], find: Callable[[str], object | None] = _spec) -> int | None:
    """None when this Python can grade; otherwise print the advice and return the exit status 2."""
    absent = missing(find)
    if not absent:
        return None
    print(advice(absent, argv), file=sys.stderr)
    return 2
