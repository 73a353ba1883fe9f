"""Shared helpers: the registry's puzzles and their known-wrong kernels, as pytest parameters."""

from __future__ import annotations

from pathlib import Path

import pytest

from checks.authoring.wrong import known_wrong, name_of
from checks.registry import ROOT, Puzzle, load_puzzles

READY = [p for p in load_puzzles() if p.ready]


def wrong_kernels() -> list[tuple[Puzzle, Path]]:
    return [(p, f) for p in READY for f in known_wrong(p)]


@pytest.fixture(scope="session")
def machine_mode() -> str:
    """How this machine grades: "gpu" with a CUDA GPU, else "interpreter"."""
    import torch

    return "gpu" if torch.cuda.is_available() else "interpreter"


def pytest_collection_modifyitems(config, items) -> None:
    """`gpu` tests need a CUDA GPU; `interpreter` tests assert what only a CPU-only run shows."""
    import torch

    gpu = torch.cuda.is_available()
    for item in items:
        if "gpu" in item.keywords and not gpu:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU"))
        if "interpreter" in item.keywords and gpu:
            item.add_marker(pytest.mark.skip(reason="asserts a CPU-only run; this machine grades on its GPU"))


def puzzle_params() -> list:
    return [pytest.param(p, id=p.stem) for p in READY]


def wrong_params() -> list:
    return [pytest.param(p, f, id=f"{p.stem}/{name_of(f)}") for p, f in wrong_kernels()]


def right_submissions() -> list[tuple[str, Path]]:
    """Each right submission in another style, with the puzzle its name starts with (`10a_x.py` is 10a)."""
    import re

    paths = sorted((ROOT / "tests" / "submissions" / "right").glob("*.py"))
    return [(re.match(r"\d+[a-z]?", p.name).group(), p) for p in paths]
