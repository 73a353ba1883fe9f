"""Learner stubs made from answer keys: what `make notebooks` (`checks.authoring.build`) puts into a notebook's
graded cell, and the answer key as a learner would write it.

A solution marks what the learner must write with nbgrader-style markers::

    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
        ### BEGIN SOLUTION
        pid = tl.program_id(axis=0)
        ...
        ### END SOLUTION

`make_stub` replaces each marked block with "FILL ME IN (roughly N lines)" and a body that
compiles (`pass` in a kernel, `raise NotImplementedError` in a host function), so one file is
both the answer key and the source of the notebook's stub cell. The grader reads submissions with
`checks.engine.submission`, which finds a graded cell by its first line, `STUB_MARKER`.
"""

from __future__ import annotations

from checks.engine.submission import STUB_MARKER

BEGIN = "### BEGIN SOLUTION"
END = "### END SOLUTION"
# An answer key that builds on a step loads that step's key between these lines when it runs on its own;
# the grader and the notebooks put the step's code in front of it instead, and leave the lines out.
KERNEL_DECORATORS = ("triton.jit", "triton.autotune", "triton.heuristics", "gluon.jit")  # a kernel's stub body: pass
RUN_ALONE_BEGIN = "### BEGIN RUN ALONE"
RUN_ALONE_END = "### END RUN ALONE"


def _code_lines(lines: list[str]) -> int:
    return sum(1 for line in lines if line.strip() and not line.strip().startswith("#"))


def _enclosing_def(lines: list[str], index: int, indent: int) -> tuple[str, bool]:
    """Name of the function a block sits in, and whether that function is a Triton kernel."""
    for j in range(index - 1, -1, -1):
        text = lines[j]
        stripped = text.lstrip()
        if stripped.startswith("def ") and len(text) - len(stripped) < indent:
            name = stripped[4:].split("(")[0]
            k = j - 1
            while k >= 0 and lines[k].lstrip().startswith("@"):
                if any(deco in lines[k] for deco in KERNEL_DECORATORS):
                    return name, True
                k -= 1
            return name, False
    return "", False


def make_stub(source: str, number: int | str) -> str:
    """The learner's version of a solution: every marked block replaced by a FILL ME IN."""
    lines = source.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.strip() != BEGIN:
            if line.strip() == END:
                raise ValueError(f"line {i + 1}: {END} without {BEGIN}")
            out.append(line)
            i += 1
            continue
        indent = len(line) - len(line.lstrip())
        pad = " " * indent
        j = i + 1
        while j < len(lines) and lines[j].strip() != END:
            if lines[j].strip() == BEGIN:
                raise ValueError(f"line {j + 1}: nested {BEGIN}")
            j += 1
        if j == len(lines):
            raise ValueError(f"line {i + 1}: {BEGIN} without {END}")
        body = lines[i + 1 : j]
        name, is_kernel = _enclosing_def(lines, i, indent)
        out.append(f"{pad}# FILL ME IN (roughly {_code_lines(body)} lines)")
        if indent and is_kernel:
            out.append(f"{pad}pass")
        elif indent:
            out.append(f'{pad}raise NotImplementedError("Puzzle {number}: fill in {name}")')
        i = j + 1
    return "\n".join(out) + "\n"


def strip_markers(source: str) -> str:
    """The answer key as a learner reads it: the solution with its marker lines removed."""
    return "\n".join(line for line in source.splitlines() if line.strip() not in (BEGIN, END)) + "\n"


def module_body(source: str) -> str:
    """A solution file without its module docstring (the notebook tells that story instead) and without the
    lines that let it run on its own (`without_run_alone`)."""
    text = without_run_alone(source).lstrip()
    for quote in ('"""', "'''"):
        if text.startswith(quote):
            end = text.find(quote, 3)
            if end != -1:
                return text[end + 3 :].lstrip("\n")
    return text


def without_run_alone(source: str) -> str:
    """The source without its RUN ALONE block (the markers included) and the blank lines before it."""
    lines = source.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        if lines[i].strip() != RUN_ALONE_BEGIN:
            out.append(lines[i])
            i += 1
            continue
        j = i + 1
        while j < len(lines) and lines[j].strip() != RUN_ALONE_END:
            j += 1
        if j == len(lines):
            raise ValueError(f"line {i + 1}: {RUN_ALONE_BEGIN} without {RUN_ALONE_END}")
        while out and not out[-1].strip():
            out.pop()
        i = j + 1
    return "\n".join(out) + ("\n" if source.endswith("\n") else "")


def stub_cell(solution_source: str, number: int | str) -> str:
    """The notebook's graded cell: the marker line, then the stubbed solution body."""
    body = make_stub(module_body(solution_source), number)
    return STUB_MARKER.format(number=number) + "\n" + body.rstrip("\n")


def answer_cell(solution_source: str, number: int | str) -> str:
    """The graded cell filled in with the answer key (what tests put into notebooks)."""
    body = strip_markers(module_body(solution_source))
    return STUB_MARKER.format(number=number) + "\n" + body.rstrip("\n")
