"""What a notebook imports: `setup()` in its first cell, `check(N)` and `hint(N)` later.

`check(N)` grades the code you last *ran* in the cell that starts with
'# Puzzle N: your code', so there is no need to save the notebook first.
"""

from __future__ import annotations

import os

from checks import verdict as V
from checks.registry import get_puzzle
from checks.sandbox import grade
from checks.source import as_module, graded_cells, notebook_code

_hints_shown: dict[int, int] = {}


def setup() -> str:
    """Pick the device before triton is imported: "cuda", or "cpu" with Triton's interpreter."""
    import torch

    if torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1":
        print(f"GPU: {torch.cuda.get_device_name()} (torch {torch.__version__})")
        return "cuda"
    os.environ["TRITON_INTERPRET"] = "1"
    print(f"No CUDA GPU: kernels run in Triton's CPU interpreter (torch {torch.__version__}). "
          "Everything works, only slower; speed is not graded.")
    return "cpu"


def _ran_cells(number: int) -> list[str]:
    """The graded cell's source as last executed in this Jupyter kernel (empty outside IPython)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return []
    shell = get_ipython()
    if shell is None:
        return []
    history = [text for text in shell.user_ns.get("In", []) if isinstance(text, str)]
    found = graded_cells(history, number)
    return found[-1:]


def check(number: int, timeout: float | None = None) -> None:
    """Grade puzzle `number` in a separate process and print the report."""
    puzzle = get_puzzle(number)
    cells = _ran_cells(number)
    if cells:
        source = (as_module(cells), "your graded cell")
    else:
        print(f"The graded cell has not been run in this session: grading the saved {puzzle.notebook.name}.")
        source = (notebook_code(puzzle.notebook, number), f"your graded cell in {puzzle.notebook.name}")
    verdict = grade(puzzle, timeout=timeout, source=source, progress=V.progress_printer(number, puzzle.title))
    print(V.format_verdict(verdict, puzzle.title, cases_shown=bool(verdict.mode)))


def hint(number: int) -> None:
    """Show the next hint for a puzzle (one more each call)."""
    puzzle = get_puzzle(number)
    if not puzzle.hints:
        print(f"Puzzle {number} has no hints yet.")
        return
    shown = min(_hints_shown.get(number, 0) + 1, len(puzzle.hints))
    _hints_shown[number] = shown
    for i in range(shown):
        print(f"Hint {i + 1} of {len(puzzle.hints)}: {puzzle.hints[i]}")
    if shown == len(puzzle.hints):
        print("That was the last hint.")

