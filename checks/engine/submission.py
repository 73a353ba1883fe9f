"""Pull a learner's code out of a notebook or a file, and load it.

A notebook's graded cell starts with `STUB_MARKER`; `notebook_code` joins a puzzle's graded cells into one
module. (The stubs in those cells are made from the answer keys by `checks.authoring.stubs`.)

A puzzle that `builds_on` an earlier step (9 on 9a, 10 on 10b) may use that step's code without
repeating it: when the submission uses a name the step's code defines and the submission does not,
`earlier_step` finds the learner's code of that step (given with --earlier, else the graded cells of
the step's notebook) and `load_module` runs it first and hands its names to the submission. A
submission that defines everything itself is graded alone; an answer key builds on the step's key.
"""

from __future__ import annotations

import ast
import builtins
import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from checks.engine.contract.kernel_source import parse_python
from checks.registry import get_puzzle, load_puzzles, puzzle_id, shown

if TYPE_CHECKING:
    from checks.registry import Puzzle

# The first line of a notebook's graded cell. The grader finds the cell by it.
STUB_MARKER = "# Puzzle {number}: your code (this whole cell is graded)"
_MARKER_RE = re.compile(r"^\s*#\s*Puzzle\s+(\d+[a-z]?):\s*your code", re.IGNORECASE)
# Put in front of the graded cell's code, on its first line, so line numbers stay those of the cell.
PREAMBLE = "import math, torch, triton, triton.language as tl  # "


class SubmissionError(Exception):
    """The submission cannot be read: the message says what to do about it."""


SUBMISSION_KINDS = (".py", ".ipynb")


def check_submission_kind(path: Path) -> None:
    """Raise SubmissionError unless `path` could be a submission: a .py file or a notebook, not a folder."""
    if path.is_dir():
        raise SubmissionError(
            f"{path} is a folder; give one file, a .py file or a notebook (.ipynb) with your graded cell "
            "(for example FILE=my_answer.py)."
        )
    if path.suffix not in SUBMISSION_KINDS:
        raise SubmissionError(
            f"{path} is neither a .py file nor a notebook (.ipynb), the only kinds the grader reads; "
            "give your answer as one of those (for example FILE=my_answer.py)."
        )


def cell_source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def graded_puzzle(cell: str) -> str | None:
    """The puzzle (as its marker writes it: "9", "10b") whose graded cell this is, by the marker on its first
    non-blank line; None for any other cell."""
    first = next((line for line in cell.splitlines() if line.strip()), "")
    match = _MARKER_RE.match(first)
    return match.group(1) if match else None


def graded_cells(cells: list[str], number: int | str) -> list[str]:
    """The cells (given as source text) whose first non-blank line is this puzzle's marker."""
    wanted = puzzle_id(number)
    return [text for text in cells if (marked := graded_puzzle(text)) is not None and puzzle_id(marked) == wanted]


def notebook_code(path: Path, number: int | str) -> str:
    """The graded cell(s) of a notebook file, joined, ready to be written out as a module."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SubmissionError(
            f"Could not read {path} as a notebook ({exc}); save it from Jupyter and try again."
        ) from exc
    cells = [cell_source(c) for c in data.get("cells", []) if c.get("cell_type") == "code"]
    found = graded_cells(cells, number)
    if not found:
        marker = STUB_MARKER.format(number=number)
        raise SubmissionError(
            f"No code cell in {path} starts with the line '{marker}'; put that line back at the top of "
            "the cell with your code (or grade a .py file with FILE=...)."
        )
    return as_module(found)


def without_magics(cell: str) -> str:
    """IPython-only lines (%magic, %%cell magic, !shell) become comments, so the cell is plain Python."""
    lines = cell.split("\n")
    return "\n".join("# " + line if line.lstrip().startswith(("%", "!")) else line for line in lines)


def as_module(cells: list[str]) -> str:
    """Join graded cells into one module; the preamble goes on line 1 so cell line numbers hold."""
    first, *rest = [without_magics(cell) for cell in cells]
    text = PREAMBLE + first
    for extra in rest:
        text += "\n" + PREAMBLE + extra
    return text + "\n"


def load_module(path: Path, name: str, earlier: Path | None = None, earlier_label: str = "") -> ModuleType:
    """Import a Python file by its path (Triton needs the source in a real file to compile a kernel).

    With `earlier` (the code of the step this one builds on), that file is imported first and its names
    are in the module's namespace before its own code runs. An answer key of a puzzle that builds on a
    step gets that step's answer key without being asked.
    """
    earlier = earlier if earlier is not None else earlier_answer_key(path)
    given: dict[str, object] = {}
    if earlier is not None:
        try:
            before = load_module(earlier, f"{name}_builds_on")
        except Exception as exc:
            label = earlier_label or shown(earlier).as_posix()
            raise EarlierStepError(f"{label} does not load: {type(exc).__name__}: {exc}") from exc
        given = {key: value for key, value in vars(before).items() if not key.startswith("__")}
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    module.__dict__.update(given)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


class EarlierStepError(Exception):
    """The code of the step a submission builds on does not load: the message says to fix that step first."""


def earlier_answer_key(path: Path) -> Path | None:
    """The answer key of the step that `path` builds on, when `path` is the answer key of such a puzzle."""
    for puzzle in load_puzzles():
        if puzzle.builds_on and puzzle.solution.resolve() == Path(path).resolve():
            return get_puzzle(puzzle.builds_on).solution
    return None


def defined_names(code: str) -> set[str]:
    """The names a module's top level binds: functions, classes, assignments, imports."""
    names: set[str] = set()
    for node in parse_python(code).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
        else:
            names |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return names


def free_names(code: str) -> set[str]:
    """The names a module reads that it never binds anywhere (nor Python's builtins)."""
    tree = parse_python(code)
    read, bound = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    return read - bound - set(dir(builtins))


def uses_earlier(code: str, earlier_code: str, fallback: str = "") -> bool:
    """Whether `code` reads a name that `earlier_code` defines and `code` itself never binds.

    Where the earlier code does not parse, the names of `fallback` (the step's answer key) stand in for
    its names, so that loading it reports its error instead of the submission's missing names.
    """
    try:
        wanted = free_names(code)
    except SyntaxError:  # the grader reports a submission that does not parse
        return False
    for text in (earlier_code, fallback):
        try:
            return bool(wanted & defined_names(text))
        except SyntaxError:
            continue
    return bool(wanted)


EarlierSource = Path | tuple[str, str]  # a file (.py or notebook), or (code, how to name it) from a notebook session


def earlier_step(
    puzzle: Puzzle, code: str, workdir: Path, given: EarlierSource | None = None, solution: bool = False
) -> tuple[Path, str] | None:
    """The code of the step `puzzle` builds on, as a module file, and how to name it; None when not needed.

    It is needed when `code` (the submission) reads a name that step's code defines and `code` does not.
    It comes from `given` (a .py file, a notebook, or code run in a notebook session), else from the graded
    cells of the step's notebook. The answer key builds on the step's answer key.
    """
    if puzzle.builds_on is None:
        return None
    step = get_puzzle(puzzle.builds_on)
    if solution:
        return step.solution, f"solutions/{step.solution.name}"
    module = workdir / f"{step.stem}_graded_cell.py"
    source = given if given is not None else step.notebook
    try:
        if isinstance(source, tuple):
            text, label = source
        elif source.suffix == ".ipynb":
            text, label = notebook_code(source, step.number), f"your step {step.number} code in {shown(source)}"
        else:
            text, label = source.read_text(encoding="utf-8"), f"your step {step.number} code in {shown(source)}"
    except (OSError, SubmissionError) as exc:
        names_from = step.solution if step.solution.exists() else None
        if names_from is not None and not uses_earlier(code, names_from.read_text(encoding="utf-8")):
            return None
        raise SubmissionError(
            f"Puzzle {puzzle.number} builds on your code of step {step.number}, but it could not be read: {exc} "
            f"Save your step {step.number} notebook ({shown(step.notebook)}), give that code with "
            f"--earlier FILE, or put everything your code uses into the file you grade."
        ) from exc
    key = step.solution.read_text(encoding="utf-8") if step.solution.exists() else ""
    if not uses_earlier(code, text, key):
        return None
    if isinstance(source, Path) and source.suffix == ".py":
        return source, label
    module.write_text(text, encoding="utf-8")
    return module, label
