"""What a notebook imports: `setup()` in its first cell, `check(N)` and `hint(N)` later.

`check(N)` grades the code you last *ran* in the cell that starts with
'# Puzzle N: your code' (or in each of the cells 'part 1 of M' ... 'part M of M', where a puzzle's
code is split into parts), so there is no need to save the notebook first. `answer_key(N)` imports
puzzle N's bundled answer key, for the cells that build on an earlier puzzle.

A puzzle that builds on an earlier step (9 on 9a, 10 on 10b) starts with `load_step("9a")`, which runs
your graded code of that step, saved in its notebook, here; `check(9)` grades your code of 9 with it
(or with the step's graded cells, where you ran them in this notebook).
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any

from checks import verdict as V
from checks.engine.compiler_arguments import compiler_arguments
from checks.engine.judging.rules.rulebook import checked_registry
from checks.engine.lean_interpreter import lean_interpreter
from checks.engine.machine import (
    autotune_without_benchmarks,
    numpy_pitfall,
    numpy_shim,
    quiet_interpreter,
)
from checks.engine.submission import as_module, graded_cells, load_module, notebook_code
from checks.learner import hints
from checks.learner.session import Checked, check_session
from checks.registry import ROOT, Puzzle, RegistryError, broken_registry_line, get_puzzle, shown


def setup() -> str:
    """Pick the device before triton is imported: "cuda", or "cpu" with Triton's interpreter."""
    import torch

    if torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1":
        print(f"GPU: {torch.cuda.get_device_name()} (torch {torch.__version__})")
        return "cuda"
    os.environ["TRITON_INTERPRET"] = "1"
    autotune_without_benchmarks()
    quiet_interpreter()
    lean_interpreter()
    compiler_arguments()
    import numpy
    import triton

    if numpy_pitfall(triton.__version__, numpy.__version__):
        numpy_shim()
    print(
        f"No CUDA GPU: kernels run in Triton's CPU interpreter (torch {torch.__version__}). "
        "Everything works, only slower; speed is not graded."
    )
    return "cpu"


_LOADED_STEPS: dict[str, tuple[str, str]] = {}  # step -> (its code, how to name it), as load_step ran it


def load_step(number: int | str) -> None:
    """Run your graded code of step `number`, saved in its notebook, in this notebook: its functions and
    kernels become names here, and check() of the puzzle that builds on it grades your code with it."""
    import inspect

    step = get_puzzle(number)
    code = notebook_code(step.notebook, step.number)
    folder = Path(tempfile.mkdtemp(prefix="checks-step-"))  # Triton compiles a kernel from its file
    path = folder / f"{step.stem}_graded_cell.py"
    path.write_text(code, encoding="utf-8")
    module = load_module(path, f"step_{step.label}")
    namespace = _user_namespace() or inspect.stack()[1].frame.f_globals
    namespace.update({key: value for key, value in vars(module).items() if not key.startswith("__")})
    label = f"your step {step.number} code in {shown(step.notebook)}"
    _LOADED_STEPS[step.number] = (code, label)
    print(f"Loaded {label}: {', '.join(step.defines)} and its kernels are defined here.")
    if "FILL ME IN" in code:
        print(
            f"It still has FILL ME IN parts: solve step {step.number} in its notebook, save it (check "
            f"{step.literal} passes), then run this cell again."
        )


def _user_namespace() -> dict[str, Any] | None:
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    shell = get_ipython()
    return shell.user_ns if shell is not None else None


def earlier_code(puzzle: Puzzle) -> tuple[str, str] | None:
    """The code of the step `puzzle` builds on as this notebook has it: the step's graded cells where they ran
    here, else what load_step loaded; None otherwise (the grader then reads the step's saved notebook)."""
    if puzzle.builds_on is None:
        return None
    ran = _ran_cells(puzzle.builds_on)
    if ran:
        return as_module(ran), f"your step {puzzle.builds_on} code as last run in this notebook"
    return _LOADED_STEPS.get(puzzle.builds_on)


_PART = re.compile(r"\bpart\s+(\d+)\s+of\s+(\d+)", re.IGNORECASE)  # in a graded cell's first line


def _part(cell: str) -> tuple[int, int]:
    """(K, M) of a graded cell whose first line says 'part K of M'; (0, 0) for a cell that is all the code."""
    first = next((line for line in cell.splitlines() if line.strip()), "")
    match = _PART.search(first)
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)


def _ran_cells(number: int | str) -> list[str]:
    """The graded cell(s) as last executed in this Jupyter kernel, the last run of each part in part
    order (empty outside IPython)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return []
    shell = get_ipython()
    if shell is None:
        return []
    history = [text for text in shell.user_ns.get("In", []) if isinstance(text, str)]
    latest = {_part(cell)[0]: cell for cell in graded_cells(history, number)}
    return [latest[part] for part in sorted(latest)]


def parts_not_run(cells: list[str]) -> list[int]:
    """The parts of a puzzle's graded code ('part K of M') that are not among the cells that ran."""
    parts = max((_part(cell)[1] for cell in cells), default=0)
    ran = {_part(cell)[0] for cell in cells}
    return [part for part in range(1, parts + 1) if part not in ran]


def check(number: int | str, timeout: float | None = None, seed: int | None = None) -> None:
    """Grade puzzle `number` in a separate process and print the report.

    `seed` makes a debugging run: the same shapes as an earlier run (the report of a failure gives the seed), and
    data values drawn from the seed too, so the same seed gives the same report; it is not recorded. Without it the
    verdict is recorded for `make progress`. When values are wrong or never written, a
    picture of where is drawn below the report (and saved in notebooks/.check_pictures/). A broken puzzles.yaml is
    said in one line, without a traceback.
    """
    try:
        checked_registry()
        puzzle = get_puzzle(number)
    except RegistryError as error:
        print(broken_registry_line(error))
        return
    cells = _ran_cells(number)
    if missing := parts_not_run(cells):
        which = f"Part {missing[0]} has" if len(missing) == 1 else f"Parts {', '.join(map(str, missing))} have"
        print(
            f"{which} not been run in this session: run every cell that starts with '# Puzzle {number}: your code' "
            f"(parts 1 to {_part(cells[0])[1]}), then check again."
        )
        return
    if cells:
        source = (as_module(cells), "your graded cells" if len(cells) > 1 else "your graded cell")
    else:
        print(f"The graded cell has not been run in this session: grading the saved {puzzle.notebook.name}.")
        source = (notebook_code(puzzle.notebook, number), f"your graded cell in {puzzle.notebook.name}")
    try:
        checked = check_session(
            puzzle,
            spare=True,
            picture=picture_folder(puzzle) / f"{puzzle.stem}.png",
            record_as=copy_name(puzzle),
            again=f"a check in {puzzle.notebook.name} records the notebook's again.",
            timeout=timeout,
            seed=seed,
            source=source,
            earlier=earlier_code(puzzle),
            progress=V.progress_printer(number, puzzle.title),
        )
    except KeyboardInterrupt:  # Kernel > Interrupt: the grading process was ended on the way out
        print(V.STOPPED)
        return
    print(checked.report(notebook=True))
    if checked.had_picture:
        _show_picture(checked)
    if checked.verdict.map_case is not None:
        _show_map(puzzle, checked.verdict.map_case, checked.verdict.seed)
    if checked.recorded:
        print(checked.recorded)


def this_notebook() -> Path | None:
    """The notebook this kernel runs for, as Jupyter names it (JPY_SESSION_NAME, or IPython's __session__)."""
    name = os.environ.get("JPY_SESSION_NAME", "")
    if not name:
        try:
            from IPython import get_ipython

            shell = get_ipython()
            name = str(shell.user_ns.get("__session__", "")) if shell is not None else ""
        except ImportError:
            name = ""
    return Path(name) if name.endswith(".ipynb") else None


def copy_name(puzzle: Puzzle) -> str:
    """'' when check() runs in the puzzle's own notebook (or that cannot be told), else the notebook's name."""
    here = this_notebook()
    if here is None:
        return ""
    same = here.resolve() == puzzle.notebook.resolve() if here.is_absolute() else here.name == puzzle.notebook.name
    return "" if same else here.name


def picture_folder(puzzle: Puzzle) -> Path:
    """Where check() keeps the last picture of each puzzle: beside the notebook, git-ignored."""
    return puzzle.notebook.parent / ".check_pictures"


def _show_map(puzzle: Puzzle, case: int, seed: int | None) -> None:
    """Under a failure of a rule on memory accesses: the access map of the failing case (its index), beside the
    answer key's (show(N, case=K, seed=S), on the code that was just graded)."""
    print(f"Drawing the access map of case {case + 1}, yours beside the answer key's (a few seconds)...")
    try:
        show(puzzle.number, case=case + 1, seed=1 if seed is None else seed)
    except Exception as exc:  # noqa: BLE001 - a map must never hide the verdict
        print(f"Could not draw the access map ({type(exc).__name__}: {exc}); show({puzzle.literal}) tries again.")


def _display(png: Path, caption: str, elsewhere: str) -> None:
    """Show a PNG under the cell in Jupyter with a caption; outside Jupyter, print `elsewhere` (where it was saved)."""
    try:
        from IPython import get_ipython
        from IPython.display import Image, display
    except ImportError:
        print(elsewhere)
        return
    if get_ipython() is None:
        print(elsewhere)
        return
    print(caption)
    display(Image(filename=str(png)))


def _show_picture(checked: Checked) -> None:
    if checked.picture is None:
        print(checked.picture_note)
        return
    _display(checked.picture, f"Where the output is wrong (saved as {shown(checked.picture)}):", checked.picture_note)


def show(number: int | str, file: str | None = None, case: int = 1, seed: int = 1) -> Path | None:
    """Draw the access map of your graded cell (as last run) beside the answer key's: which program touched what.

    `case` is numbered from 1, as a check's report numbers the cases; `seed` draws it as a check with that seed."""
    from checks.learner.maps import MapError, make_map, no_map  # matplotlib is imported only when a map is asked for

    puzzle = get_puzzle(number)
    if puzzle.needs_hopper:
        print(no_map(puzzle))
        return None
    cells = [] if file else _ran_cells(number)
    source = (as_module(cells), "your graded cell") if cells else None
    out = picture_folder(puzzle) / f"{puzzle.stem}_map.png"
    count = len(puzzle.cases.cpu)
    if not 1 <= case <= count:
        print(f"Puzzle {puzzle.number} has {count} cases in the interpreter; pick case=1 to case={count}.")
        return None
    try:
        png, lines = make_map(puzzle, Path(file) if file else None, case=case - 1, source=source, out=out, seed=seed)
    except MapError as exc:
        print(exc)
        return None
    print("\n".join(lines))
    _display(png, f"Which program loaded what (saved as {shown(png)}):", f"The access map is saved as {png}.")
    return png


def hint(number: int | str) -> None:
    """Show the next hint for a puzzle (one more each call; `make hint PUZZLE=N` shares the count)."""
    print("\n".join(hints.reveal(number, where=hints.NOTEBOOK)))


def answer_key(number: int) -> ModuleType:
    """Puzzle `number`'s answer key from `solutions/`, imported as a module.

    Raises FileNotFoundError with a sentence to read when the file is not there (a class copy of
    the course may leave `solutions/` out).
    """
    puzzle = get_puzzle(number)
    path = puzzle.solution
    if not path.is_file():
        raise FileNotFoundError(
            f"This cell uses puzzle {number}'s answer key, {path.relative_to(ROOT)}, which is not in this "
            f"copy of the course. Use your own solution instead: run your graded cell of "
            f"{puzzle.notebook.name} in this notebook, or import it from a file."
        )
    return load_module(path, f"answer_key_{puzzle.stem}")
