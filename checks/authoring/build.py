"""`python -m checks.authoring.build [--check]`: generate the notebooks and the README's puzzle table.

Sources: `notebooks/src/NN_slug.md` (the narrative) and `solutions/NN_slug.py` (the code). In a
source, fenced blocks become code cells, and the text between them markdown cells:

    ```python      an ordinary code cell
    ```{setup}     the standard first code cell (finds the course, loads the grader)
    ```{stub}      the graded cell: the solution with its marked blocks replaced by FILL ME IN. A fence
                   that names functions (`_attn_fwd_inner`, one or more) makes the graded code several
                   cells: each holds its functions, the first also what comes before them, and each
                   begins '# Puzzle N: your code, part K of M' (the grader joins them in that order)
    ```{check}     the check cell: check(N)
    ```{figure}    a markdown cell showing a figure of recorded GPU measurements (checks/authoring/figures.py);
                   the fence holds the figure's name

A line `<!-- cell -->` splits markdown into two cells. The figures are drawn into
`notebooks/figures/` from `bench/`. With --check nothing is written; the exit status is 1 when a
generated file, or a figure, differs from what its sources give.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from pathlib import Path

from checks.authoring import figures
from checks.engine.submission import answer_cell, make_stub, module_body, strip_markers, stub_cell
from checks.registry import ROOT, Puzzle, load_puzzles

SETUP_CELL = """\
# Setup: run this cell first. It finds the course folder, loads the grader and picks the device:
# a CUDA GPU if there is one, otherwise Triton's CPU interpreter (TRITON_INTERPRET=1).
import pathlib, sys
ROOT = next(p for p in [pathlib.Path.cwd(), *pathlib.Path.cwd().parents] if (p / "puzzles.yaml").exists())
sys.path.insert(0, str(ROOT))
from checks.learner.notebook import check, hint, setup
DEVICE = setup()  # "cuda" or "cpu"; must run before triton is imported
import math, torch, triton, triton.language as tl"""

CHECK_CELL = "check({literal})  # grades the {cell} marked 'Puzzle {number}: your code' in a separate process"
PART_MARKER = "# Puzzle {number}: your code, part {part} of {parts} (this whole cell is graded)"

_FENCE = re.compile(r"^```(\S*)\s*$")


def _cell(kind: str, source: str, cell_id: str, **metadata: object) -> dict:
    cell = {"cell_type": kind, "id": cell_id, "metadata": dict(metadata), "source": _lines(source)}
    if kind == "code":
        cell["execution_count"] = None
        cell["outputs"] = []
    return cell


def _lines(text: str) -> list[str]:
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def parse(text: str) -> list[tuple[str, str]]:
    """(kind, text) blocks of a source: kind is 'markdown', 'python', 'setup', 'stub', 'check' or 'figure'."""
    blocks: list[tuple[str, str]] = []
    markdown: list[str] = []
    lines = text.splitlines()
    i = 0

    def flush() -> None:
        body = "\n".join(markdown).strip("\n")
        for part in re.split(r"^<!-- cell -->$", body, flags=re.MULTILINE):
            if part.strip():
                blocks.append(("markdown", part.strip("\n")))
        markdown.clear()

    while i < len(lines):
        match = _FENCE.match(lines[i])
        if match and match.group(1) in ("python", "{setup}", "{stub}", "{check}", "{figure}"):
            flush()
            j = i + 1
            while j < len(lines) and lines[j].rstrip() != "```":
                j += 1
            if j == len(lines):
                raise ValueError(f"line {i + 1}: a code fence is never closed")
            blocks.append((match.group(1).strip("{}"), "\n".join(lines[i + 1 : j])))
            i = j + 1
            continue
        markdown.append(lines[i])
        i += 1
    flush()
    return blocks


def graded_parts(solution_text: str, number: int | str, fences: list[list[str]], filled: bool) -> list[str]:
    """The graded cells' code: one cell with the whole solution, or one per {stub} fence that names functions.

    A fence's cell runs from its first function (with the comment lines right above it) to the next
    fence's first function; the first cell starts at the top. The names must follow the file's order.
    """
    if fences == [[]]:
        return [(answer_cell if filled else stub_cell)(solution_text, number)]
    if not all(fences):
        raise ValueError("when one {stub} fence names functions, every {stub} fence must")
    body = module_body(solution_text)
    lines = body.splitlines()
    starts = {
        node.name: min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 1
        for node in ast.parse(body).body
        if isinstance(node, (ast.FunctionDef, ast.ClassDef))
    }
    order = [name for names in fences for name in names]
    missing = [name for name in order if name not in starts]
    if missing:
        raise ValueError(f"the {{stub}} fences name {', '.join(missing)}, which the solution does not define")
    if [starts[n] for n in order] != sorted(starts[n] for n in order):
        raise ValueError(f"the {{stub}} fences must name the functions in the solution's order: {', '.join(order)}")
    bounds = [0]
    for names in fences[1:]:
        start = starts[names[0]]
        while start > 0 and lines[start - 1].startswith("#"):  # the comment that introduces it comes along
            start -= 1
        bounds.append(start)
    bounds.append(len(lines))
    cells = []
    for part, (lo, hi) in enumerate(zip(bounds, bounds[1:], strict=False), start=1):
        code = "\n".join(lines[lo:hi]).strip("\n") + "\n"
        code = strip_markers(code) if filled else make_stub(code, number)
        marker = PART_MARKER.format(number=number, part=part, parts=len(fences))
        cells.append(marker + "\n" + code.rstrip("\n"))
    return cells


def build_notebook(puzzle: Puzzle, source_text: str, solution_text: str, filled: bool = False) -> dict:
    """The notebook for one puzzle; with filled=True its graded cell(s) hold the answer key."""
    cells = []
    blocks = parse(source_text)
    fences = [text.split() for kind, text in blocks if kind == "stub"]
    parts = graded_parts(solution_text, puzzle.number, fences, filled) if fences else []
    for index, (kind, text) in enumerate(blocks):
        cell_id = f"p{puzzle.label}-{index:02d}"
        if kind == "markdown":
            cells.append(_cell("markdown", text, cell_id))
        elif kind == "python":
            cells.append(_cell("code", text, cell_id))
        elif kind == "setup":
            cells.append(_cell("code", SETUP_CELL, cell_id, tags=["setup"]))
        elif kind == "stub":
            part = len([c for c in cells if "stub" in c["metadata"].get("tags", [])])  # the graded cells so far
            cell_id = f"p{puzzle.label}-stub" + (str(part + 1) if part else "")
            cells.append(_cell("code", parts[part], cell_id, tags=["stub"]))
        elif kind == "check":
            cell = "cells" if len(fences) > 1 else "cell"
            check = CHECK_CELL.format(literal=puzzle.literal, number=puzzle.number, cell=cell)
            cells.append(_cell("code", check, cell_id, tags=["check"]))
        elif kind == "figure":
            cells.append(_cell("markdown", figures.markdown(text.strip()), cell_id))
    return {
        "cells": cells,
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def notebook_json(notebook: dict) -> str:
    return json.dumps(notebook, indent=1, ensure_ascii=False) + "\n"


def setup_notebook() -> dict:
    source = (ROOT / "notebooks" / "src" / "00_setup.md").read_text(encoding="utf-8")
    fake = Puzzle("0", "setup", "Set-up check", "ready", ("",), "", "", (), ROOT, ROOT)
    return build_notebook(fake, source, "")


def readme_table() -> str:
    rows = ["| # | puzzle | you write | inputs | returns | status |", "|---|---|---|---|---|---|"]
    for p in load_puzzles():
        nb = f"[{p.title}](notebooks/{p.notebook.name})" if p.ready else p.title
        status = "ready" if p.ready else "planned"
        rows.append(f"| {p.number} | {nb} | `{p.name}` | {p.inputs} | {p.returns} | {status} |")
    return "\n".join(rows)


BEGIN_TABLE, END_TABLE = (
    "<!-- puzzles:begin (generated from puzzles.yaml by make notebooks) -->",
    "<!-- puzzles:end -->",
)


def readme_text(current: str) -> str:
    start, end = current.index(BEGIN_TABLE) + len(BEGIN_TABLE), current.index(END_TABLE)
    return current[:start] + "\n" + readme_table() + "\n" + current[end:]


def generated() -> dict[Path, str]:
    """Every generated file and the text it should have."""
    files: dict[Path, str] = {ROOT / "notebooks" / "00_setup.ipynb": notebook_json(setup_notebook())}
    for p in load_puzzles():
        if not p.ready:
            continue
        notebook = build_notebook(
            p, p.notebook_source.read_text(encoding="utf-8"), p.solution.read_text(encoding="utf-8")
        )
        files[p.notebook] = notebook_json(notebook)
    readme = ROOT / "README.md"
    files[readme] = readme_text(readme.read_text(encoding="utf-8"))
    return files


def main(argv: list[str] | None = None) -> int:
    args = argparse.ArgumentParser(prog="python -m checks.authoring.build", description=__doc__.splitlines()[0])
    args.add_argument("--check", action="store_true", help="write nothing; exit 1 if a generated file is stale")
    opts = args.parse_args(argv)
    stale = []
    for path, text in generated().items():
        old = path.read_text(encoding="utf-8") if path.exists() else None
        if old == text:
            continue
        stale.append(path.relative_to(ROOT))
        if not opts.check:
            path.write_text(text, encoding="utf-8")
    stale += figures.stale() if opts.check else figures.write()
    if opts.check and stale:
        names = ", ".join(str(s) for s in stale)
        print(
            f"Generated files are out of date with their sources: {names}. Run `make notebooks` and commit.",
            file=sys.stderr,
        )
        return 1
    if not opts.check:
        print(f"{len(stale)} generated file(s) updated." if stale else "Generated files are up to date.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
