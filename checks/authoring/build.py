"""`python -m checks.authoring.build [--check]`: generate the notebooks, the README's puzzle table and the reference
page's rule index.

Sources: `notebooks/src/NN_slug.md` (the narrative) and `solutions/NN_slug.py` (the code); the
set-up notebook and the reference page (`notebooks/src/reference.md` -> `notebooks/reference.ipynb`)
have a narrative only. Every lesson's first cell ends with a link to the reference page. In a
source, fenced blocks become code cells, and the text between them markdown cells:

    ```python      an ordinary code cell
    ```{setup}     the standard first code cell (finds the course, loads the grader)
    ```{stub}      the graded cell: the solution with its marked blocks replaced by FILL ME IN. A fence
                   that names functions (`_attn_fwd_inner`, one or more) makes the graded code several
                   cells: each holds its functions, the first also what comes before them, and each
                   begins '# Puzzle N: your code, part K of M' (the grader joins them in that order)
    ```{earlier}   for a puzzle that builds on an earlier step (9 on 9a): the cell that runs the learner's code
                   of that step, saved in its notebook (load_step); in a filled notebook, that step's answer key
    ```{check}     the check cell: check(N)
    ```{figure}    a markdown cell showing a figure of recorded GPU measurements (checks/authoring/figures.py);
                   the fence holds the figure's name
    ```{course}    a markdown cell listing the notebooks in course order (puzzles.yaml), each a link, since
                   a file browser sorts `10_` before `10a_`

A line `<!-- cell -->` splits markdown into two cells. Between its `<!-- rules:begin ... -->` and
`<!-- rules:end -->` lines the reference page's source holds the rule index, generated from the rulebook
(`checks.engine.judging.rules.rulebook`: each rule's declared row, in the order the rules are checked), as the
README's puzzle table is from puzzles.yaml. The figures are drawn into
`notebooks/figures/` from `bench/`. With --check nothing is written; the exit status is 1 when a
generated file, or a figure, differs from what its sources give.

A learner works in the notebooks themselves, so a notebook can differ from what its sources give
in two ways, and the two are told apart (`drift`): the course's own text (a lesson cell, the
check cell, cells added or removed), or only the learner's work (the code in graded cells, cell
outputs, cells the learner added). The learner's work is never drift: --check notes it and passes,
and a rebuild leaves such a notebook alone. When the course's text changed in a notebook that also
holds the learner's work, the rebuild refuses to overwrite it unless given --force
(`make notebooks FORCE=1`), and then first copies it to `build/notebook-backups/`. A notebook whose
committed version (git HEAD) already differs from its sources is the course's drift whatever
differs, so CI, which grades a clean checkout, still catches an answer committed in a graded cell.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from checks.authoring import figures
from checks.authoring.stubs import answer_cell, make_stub, module_body, strip_markers, stub_cell
from checks.engine.judging.rules import rulebook
from checks.registry import ROOT, Puzzle, get_puzzle, load_puzzles

SETUP_CELL = """\
# Setup: run this cell first. It finds the course folder, loads the grader and picks the device:
# a CUDA GPU if there is one, otherwise Triton's CPU interpreter (TRITON_INTERPRET=1).
import pathlib, sys
ROOT = next(p for p in [pathlib.Path.cwd(), *pathlib.Path.cwd().parents] if (p / "puzzles.yaml").exists())
sys.path.insert(0, str(ROOT))
from checks.learner.notebook import check, hint, setup
DEVICE = setup()  # "cuda" or "cpu"; must run before triton is imported
import math, torch, triton, triton.language as tl"""

REFERENCE_SOURCE = "reference.md"  # under notebooks/src
REFERENCE_NOTEBOOK = "reference.ipynb"  # under notebooks
REFERENCE_LINK = (
    f"*Reference page: [every `tl.*` function, CUDA and Triton, debugging and error messages, the "
    f"formulas, the grader's rules]({REFERENCE_NOTEBOOK})*"
)

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
    """(kind, text) blocks of a source: kind is 'markdown', 'python', 'setup', 'stub', 'earlier', 'check' or
    'figure'."""
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
        if match and match.group(1) in ("python", "{setup}", "{stub}", "{check}", "{figure}", "{earlier}", "{course}"):
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


def build_notebook(
    puzzle: Puzzle,
    source_text: str,
    solution_text: str,
    filled: bool = False,
    reference_link: bool = True,
    cell_prefix: str = "",
) -> dict:
    """The notebook for one puzzle; with filled=True its graded cell(s) hold the answer key.

    With reference_link, the first markdown cell ends with the link to the reference page. Cell ids
    start with cell_prefix (default `p` and the puzzle's label: `p07-03`, `p07-stub`).
    """
    cell_prefix = cell_prefix or f"p{puzzle.label}"
    cells = []
    blocks = parse(source_text)
    fences = [text.split() for kind, text in blocks if kind == "stub"]
    parts = graded_parts(solution_text, puzzle.number, fences, filled) if fences else []
    for index, (kind, text) in enumerate(blocks):
        cell_id = f"{cell_prefix}-{index:02d}"
        if kind == "markdown":
            first = reference_link and not any(c["cell_type"] == "markdown" for c in cells)
            cells.append(_cell("markdown", text + "\n\n" + REFERENCE_LINK if first else text, cell_id))
        elif kind == "python":
            cells.append(_cell("code", text, cell_id))
        elif kind == "setup":
            cells.append(_cell("code", SETUP_CELL, cell_id, tags=["setup"]))
        elif kind == "stub":
            part = len([c for c in cells if "stub" in c["metadata"].get("tags", [])])  # the graded cells so far
            cell_id = f"{cell_prefix}-stub" + (str(part + 1) if part else "")
            cells.append(_cell("code", parts[part], cell_id, tags=["stub"]))
        elif kind == "earlier":
            cells.append(_cell("code", earlier_cell(puzzle, filled), cell_id, tags=["earlier"]))
        elif kind == "check":
            cell = "cells" if len(fences) > 1 else "cell"
            check = CHECK_CELL.format(literal=puzzle.literal, number=puzzle.number, cell=cell)
            cells.append(_cell("code", check, cell_id, tags=["check"]))
        elif kind == "figure":
            cells.append(_cell("markdown", figures.markdown(text.strip()), cell_id))
        elif kind == "course":
            cells.append(_cell("markdown", course_order(), cell_id))
    return {
        "cells": cells,
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }


EARLIER_CELL = """\
# Your code of step {number}, from {notebook} (save that notebook first):
# its functions and kernels are defined here as they are there, and check({literal}) grades your
# code below together with it. Changed your step {number} code? Save it and run this cell again.
from checks.learner.notebook import load_step
load_step("{number}")"""


def earlier_cell(puzzle: Puzzle, filled: bool) -> str:
    """The cell that brings in the learner's code of the step `puzzle` builds on (the answer key, when filled)."""
    if puzzle.builds_on is None:
        raise ValueError(f"puzzle {puzzle.number} has an {{earlier}} fence but builds on no step (builds_on:)")
    step = get_puzzle(puzzle.builds_on)
    if filled:
        return answer_cell(step.solution.read_text(encoding="utf-8"), step.number)
    return EARLIER_CELL.format(number=step.number, notebook=f"notebooks/{step.notebook.name}", literal=puzzle.literal)


def course_order() -> str:
    """The notebooks in course order, from puzzles.yaml: a list of links (lettered steps before their puzzle)."""
    rows = ["**The notebooks in course order** (a file browser sorts `10_` before `10a_`; this list does not):", ""]
    for p in load_puzzles():
        if p.ready:
            kind = "Puzzle" if p.number.isdigit() else "Step"
            rows.append(f"- [{kind} {p.number}: {p.title}]({p.notebook.name})")
    return "\n".join(rows)


def notebook_json(notebook: dict) -> str:
    return json.dumps(notebook, indent=1, ensure_ascii=False) + "\n"


def setup_notebook() -> dict:
    source = (ROOT / "notebooks" / "src" / "00_setup.md").read_text(encoding="utf-8")
    fake = Puzzle("0", "setup", "Set-up check", "ready", ("",), "", "", (), ROOT, ROOT)
    return build_notebook(fake, source, "")


def reference_notebook(source: str | None = None) -> dict:
    """The reference page's notebook, from its source (by default the file's text)."""
    if source is None:
        source = (ROOT / "notebooks" / "src" / REFERENCE_SOURCE).read_text(encoding="utf-8")
    fake = Puzzle("ref", "reference", "Reference", "ready", ("",), "", "", (), ROOT, ROOT)
    return build_notebook(fake, source, "", reference_link=False, cell_prefix="ref")


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


def between(current: str, begin: str, end: str, block: str) -> str:
    """`current` with the text between its `begin` and `end` lines replaced by `block`."""
    start, stop = current.index(begin) + len(begin), current.index(end)
    return current[:start] + "\n" + block + "\n" + current[stop:]


def readme_text(current: str) -> str:
    return between(current, BEGIN_TABLE, END_TABLE, readme_table())


def rules_index() -> str:
    """The reference page's rule index: every rule of the rulebook in the order it is checked, with its declared
    row (what it checks, what to do when it fails) and the puzzle that teaches it."""
    puzzles = load_puzzles()
    every_call = len(rulebook.checked(rulebook.EVERY_CALL))
    rows = [
        f"The first {every_call} rules apply to every puzzle: those about the plan your function recorded, then "
        f"those about what the replay of your kernels did. The other {len(rulebook.RULES) - every_call} apply "
        "where `puzzles.yaml` asks for them (`rules:`).",
        "",
        "| rule | what it checks | what to do when it fails | taught in |",
        "|---|---|---|---|",
    ]
    for rule in rulebook.RULES.values():
        rows.append(f"| `{rule.name}` | {rule.checks} | {rule.message} | {rulebook.taught_in(rule, puzzles)} |")
    return "\n".join(rows)


BEGIN_RULES, END_RULES = (
    "<!-- rules:begin (generated from the rulebook, checks/engine/judging/rules, by make notebooks) -->",
    "<!-- rules:end -->",
)


def reference_text(current: str) -> str:
    return between(current, BEGIN_RULES, END_RULES, rules_index())


def generated() -> dict[Path, str]:
    """Every generated file and the text it should have."""
    files: dict[Path, str] = {
        ROOT / "notebooks" / "00_setup.ipynb": notebook_json(setup_notebook()),
    }
    for p in load_puzzles():
        if not p.ready:
            continue
        notebook = build_notebook(
            p, p.notebook_source.read_text(encoding="utf-8"), p.solution.read_text(encoding="utf-8")
        )
        files[p.notebook] = notebook_json(notebook)
    reference = ROOT / "notebooks" / "src" / REFERENCE_SOURCE
    reference_source = reference_text(reference.read_text(encoding="utf-8"))
    files[reference] = reference_source
    reference_page = notebook_json(reference_notebook(reference_source))
    files[ROOT / "notebooks" / REFERENCE_NOTEBOOK] = reference_page  # after the course
    readme = ROOT / "README.md"
    files[readme] = readme_text(readme.read_text(encoding="utf-8"))
    return files


BACKUPS = "build/notebook-backups"


def _source(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def course_view(notebook: dict, ids: set[str] | None = None) -> list[tuple[str, str, str, tuple[str, ...]]]:
    """What the course owns in a notebook: each cell's kind, id, tags and source, the graded cells' source
    left out (it is the learner's); with `ids`, only the cells whose id is one of them (the course's cells)."""
    view = []
    for cell in notebook.get("cells", []):
        if ids is not None and cell.get("id") not in ids:
            continue
        tags = tuple(cell.get("metadata", {}).get("tags", []))
        view.append((cell.get("cell_type", ""), str(cell.get("id")), "" if "stub" in tags else _source(cell), tags))
    return view


def learners_work_only(current: str, wanted: str) -> bool:
    """Whether a notebook differs from what its sources give only by a learner's work: the graded cells'
    code, outputs and execution counts, metadata, and cells the learner added."""
    try:
        old, new = json.loads(current), json.loads(wanted)
    except json.JSONDecodeError:
        return False
    ids = {str(cell.get("id")) for cell in new.get("cells", [])}
    return course_view(old, ids) == course_view(new)


def committed(path: Path) -> str | None:
    """The file's text in the last commit (git HEAD), or None outside a git checkout or for a new file."""
    try:
        done = subprocess.run(
            ["git", "show", f"HEAD:{path.relative_to(ROOT).as_posix()}"],
            cwd=ROOT,
            capture_output=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    return done.stdout.decode("utf-8", errors="replace") if done.returncode == 0 else None


@dataclass
class Drift:
    """How the generated files stand against their sources."""

    stale: list[Path] = field(default_factory=list)  # the course's text differs: to be rebuilt
    learners: list[Path] = field(default_factory=list)  # only a learner's work differs: left alone
    guarded: list[Path] = field(default_factory=list)  # stale, and also holding a learner's work


def drift(files: dict[Path, str] | None = None) -> Drift:
    """Sort every generated file that differs from its sources into the course's drift and a learner's work."""
    found = Drift()
    for path, text in (generated() if files is None else files).items():
        old = path.read_text(encoding="utf-8") if path.exists() else None
        if old is None or old == text:
            if old is None:
                found.stale.append(path)
            continue
        if path.suffix != ".ipynb":
            found.stale.append(path)
            continue
        base = committed(path)
        if learners_work_only(old, text) and base != old:  # a local change, so the learner's: not the course's
            found.learners.append(path)
            continue
        found.stale.append(path)
        if _has_work(old, text, base):
            found.guarded.append(path)
    return found


def _has_work(current: str, wanted: str, committed_text: str | None) -> bool:
    """Whether a notebook holds a learner's work that a rebuild would lose: graded cells with other code than
    the committed version's (or, outside git, than the sources give), or cells of the learner's own (ids
    that neither the sources nor the committed version have)."""
    try:
        old, new = json.loads(current), json.loads(wanted)
        base = json.loads(committed_text) if committed_text is not None else new
    except json.JSONDecodeError:
        return False

    def graded(nb: dict) -> list[str]:
        return [_source(c) for c in nb.get("cells", []) if "stub" in c.get("metadata", {}).get("tags", [])]

    def ids(nb: dict) -> set[str]:
        return {str(c.get("id")) for c in nb.get("cells", [])}

    return graded(old) != graded(base) or bool(ids(old) - ids(new) - ids(base))


def backup(path: Path) -> Path:
    """Copy a notebook to build/notebook-backups/ with the time in its name; returns the copy."""
    folder = ROOT / BACKUPS
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{path.stem}.{time.strftime('%Y%m%d-%H%M%S')}{path.suffix}"
    shutil.copy2(path, target)
    return target


def _names(paths: list[Path]) -> str:
    return ", ".join(str(p.relative_to(ROOT)) for p in paths)


def main(argv: list[str] | None = None) -> int:
    args = argparse.ArgumentParser(prog="python -m checks.authoring.build", description=__doc__.splitlines()[0])
    args.add_argument("--check", action="store_true", help="write nothing; exit 1 if a generated file is stale")
    args.add_argument(
        "--force",
        action="store_true",
        help="also rebuild notebooks that hold a learner's answers (each is first copied to build/notebook-backups/)",
    )
    opts = args.parse_args(argv)
    files = generated()
    found = drift(files)
    if found.learners:
        print(
            f"Your answers are in {_names(found.learners)} (graded cells, outputs or cells you added); "
            "the course's own text there matches its sources, so nothing needs rebuilding and "
            f"{'nothing was changed' if not opts.check else 'this is not drift'}."
        )
    if opts.check:
        stale = found.stale + figures.stale()
        if stale:
            names = ", ".join(str(s.relative_to(ROOT)) if isinstance(s, Path) else s for s in stale)
            advice = "Run `make notebooks` and commit."
            if found.guarded:
                advice = (
                    f"{_names(found.guarded)} also hold answers in graded cells: `make notebooks` keeps them "
                    "(it refuses to overwrite them); `make notebooks FORCE=1` rebuilds them after copying each "
                    f"to {BACKUPS}/."
                )
            print(f"Generated files are out of date with their sources: {names}. {advice}", file=sys.stderr)
            return 1
        return 0
    if found.guarded and not opts.force:
        print(
            f"Not rebuilt, to keep the answers in their graded cells: {_names(found.guarded)}. "
            f"`make notebooks FORCE=1` rebuilds them too, after copying each to {BACKUPS}/ "
            "(copy your answers back from there).",
            file=sys.stderr,
        )
    written = []
    for path in found.stale:
        if path in found.guarded:
            if not opts.force:
                continue
            print(f"Your version of {path.relative_to(ROOT)} is kept in {backup(path).relative_to(ROOT)}.")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(files[path], encoding="utf-8")
        written.append(path)
    written += figures.write()
    print(f"{len(written)} generated file(s) updated." if written else "Generated files are up to date.")
    return 1 if found.guarded and not opts.force else 0


if __name__ == "__main__":
    raise SystemExit(main())
