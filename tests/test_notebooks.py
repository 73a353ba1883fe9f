"""Each notebook runs headless in a real Jupyter kernel with the answer key in its graded cell."""

from __future__ import annotations

import json

import pytest

from checks.authoring.build import build_notebook, reference_notebook, setup_notebook
from checks.registry import ROOT
from tests.helpers import puzzle_params

pytestmark = pytest.mark.slow  # every test here grades, runs notebooks or renders

# A GPU machine without network has no Jupyter: these tests need it to execute notebooks.
WHY = "executing notebooks needs nbformat and nbclient (make env-dev)"
nbformat = pytest.importorskip("nbformat", reason=WHY)
NotebookClient = pytest.importorskip("nbclient", reason=WHY).NotebookClient


def execute(notebook: dict) -> nbformat.NotebookNode:
    nb = nbformat.reads(json.dumps(notebook), as_version=4)
    client = NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(ROOT / "notebooks")}}
    )
    client.execute()
    return nb


def text_of(cell) -> str:
    return "".join(out.get("text", "") for out in cell.get("outputs", []))


def test_setup_notebook_runs():
    nb = execute(setup_notebook())
    assert "gave the right answer" in "".join(text_of(c) for c in nb.cells if c.cell_type == "code")


def test_reference_notebook_runs_and_prints_what_it_says():
    import torch

    nb = execute(reference_notebook())
    printed = "".join(text_of(c) for c in nb.cells if c.cell_type == "code")
    if not torch.cuda.is_available():  # the interpreter's print, as the page quotes it
        quoted = "pid [1] offs [4 5 6 7] mask [ True  True False False] x [4. 5. 0. 0.]"
        assert quoted in printed and quoted in (ROOT / "notebooks" / "src" / "reference.md").read_text()


@pytest.mark.parametrize("puzzle", puzzle_params())
def test_notebook_runs_and_its_check_passes_with_the_answer(puzzle):
    filled = build_notebook(
        puzzle,
        puzzle.notebook_source.read_text(encoding="utf-8"),
        puzzle.solution.read_text(encoding="utf-8"),
        filled=True,
    )
    nb = execute(filled)
    checks = [c for c in nb.cells if "check" in c.metadata.get("tags", [])]
    assert len(checks) == 1
    report = text_of(checks[0])
    assert "PASSED" in report, report
