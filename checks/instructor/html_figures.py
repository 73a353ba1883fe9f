"""The lesson figures of a notebook, drawn without Jupyter, for `make html` (see `checks.instructor.html`).

The notebooks are committed without outputs, so their pictures (launch orders, block grids,
the causal mask) exist only once a cell runs. `draw(notebook)` runs, in a child process with
Triton's CPU interpreter, every lesson cell up to the last one that draws with matplotlib
(never the graded cell, a check or a hint), and returns the PNGs each drawing cell made. A cell
that fails is skipped; a figure cell that fails simply has no picture.

`python -m checks.instructor.html_figures` is the child: it reads the cells as JSON on stdin and writes
{cell index: [base64 PNG, ...]} as JSON to stdout.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import subprocess
import sys

from checks.engine.submission import cell_source, graded_puzzle, without_magics
from checks.registry import ROOT

TIMEOUT = 300.0  # seconds for one notebook's cells


def draws(source: str) -> bool:
    return "plt." in source or "matplotlib" in source


def lesson_cells(cells: list[dict]) -> list[tuple[int, str, bool]]:
    """(index, code, draws) for each code cell to run: lesson cells up to the last one that draws."""
    chosen = []
    for index, cell in enumerate(cells):
        if cell.get("cell_type") != "code":
            continue
        source = cell_source(cell)
        if graded_puzzle(source) is not None or "check(" in source or "hint(" in source:
            continue
        chosen.append((index, without_magics(source), draws(source)))
    while chosen and not chosen[-1][2]:
        chosen.pop()
    return chosen


def draw(cells: list[dict], timeout: float = TIMEOUT) -> tuple[dict[int, list[str]], str]:
    """{cell index: [base64 PNG]} for the cells that draw, and a sentence when something went wrong."""
    todo = lesson_cells(cells)
    if not todo:
        return {}, ""
    env = dict(
        os.environ,
        TRITON_INTERPRET="1",
        MPLBACKEND="Agg",
        PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
    )
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "checks.instructor.html_figures"],
            input=json.dumps(todo),
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return {}, f"its lesson cells did not finish within {timeout:g} s"
    try:
        found = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        last = (proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
        return {}, f"its lesson cells could not be run ({last[:200]})"
    return {int(k): v for k, v in found.items()}, ""


def _run(todo: list[tuple[int, str, bool]]) -> dict[int, list[str]]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.show = lambda *args, **kwargs: None
    namespace: dict = {"__name__": "__main__"}
    pictures: dict[int, list[str]] = {}
    for index, source, drawing in todo:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            try:
                exec(compile(source, f"<cell {index}>", "exec"), namespace)  # the course's own lesson cells
            except BaseException:  # noqa: BLE001 - a lesson cell that fails here only costs its picture
                plt.close("all")
                continue
        if drawing:
            for number in plt.get_fignums():
                buffer = io.BytesIO()
                plt.figure(number).savefig(buffer, format="png", bbox_inches="tight", dpi=80)
                pictures.setdefault(index, []).append(base64.b64encode(buffer.getvalue()).decode("ascii"))
        plt.close("all")
    return pictures


def main() -> int:
    todo = [(int(i), str(s), bool(d)) for i, s, d in json.loads(sys.stdin.read())]
    print(json.dumps(_run(todo)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
