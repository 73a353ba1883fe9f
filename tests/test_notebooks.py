"""Each notebook runs headless in a real Jupyter kernel with the answer key in its graded cell."""

from __future__ import annotations

import json

import pytest

from checks.authoring.build import build_notebook, reference_notebook, setup_notebook
from checks.registry import ROOT
from tests.helpers import JUPYTER, puzzle_params

pytestmark = pytest.mark.slow  # every test here grades, runs notebooks or renders

if not JUPYTER:  # the answer keys are then graded directly (tests/test_answer_key.py)
    pytest.skip("executing notebooks needs nbformat, nbclient and ipykernel (make env-dev)", allow_module_level=True)

import nbclient  # noqa: E402
import nbformat  # noqa: E402

NotebookClient = nbclient.NotebookClient
CellExecutionError = nbclient.exceptions.CellExecutionError


class Kernel:
    """One Jupyter kernel for the notebooks this test worker runs, each run as after Kernel > Restart: IPython's
    reset with a new session first deletes every name the last notebook defined and its cell history (a
    notebook that uses a name it never defines still fails, and `check` sees only this notebook's cells),
    while modules stay imported: the seconds of importing torch and Triton, and of starting the fork server
    its checks fork grading processes from, are paid once per worker, not once per notebook."""

    def __init__(self) -> None:
        self.client = NotebookClient(
            nbformat.v4.new_notebook(),
            timeout=600,
            kernel_name="python3",
            resources={"metadata": {"path": str(NOTEBOOKS)}},
        )
        self.client.km = self.client.create_kernel_manager()
        self.client.start_new_kernel(cwd=str(NOTEBOOKS))
        self.client.start_new_kernel_client()

    def execute(self, notebook: dict) -> nbformat.NotebookNode:
        restart = nbformat.v4.new_code_cell(RESTART)
        self.client.nb = nbformat.v4.new_notebook(cells=[restart])
        self.client.execute_cell(restart, 0)
        nb = nbformat.reads(json.dumps(notebook), as_version=4)
        self.client.nb = nb
        self.client.reset_execution_trackers()
        for index, cell in enumerate(nb.cells):
            self.client.execute_cell(cell, index, execution_count=self.client.code_cells_executed + 1)
        return nb

    def close(self) -> None:
        self.client._cleanup_kernel()


NOTEBOOKS = ROOT / "notebooks"
# what Kernel > Restart leaves a notebook: no names, no cell history, and the notebooks folder as its folder
RESTART = f"get_ipython().reset(new_session=True)\nimport os as _os\n_os.chdir({str(NOTEBOOKS)!r})\ndel _os"


@pytest.fixture(scope="module")
def kernel():
    running = Kernel()
    yield running
    running.close()


def text_of(cell) -> str:
    return "".join(out.get("text", "") for out in cell.get("outputs", []))


def test_setup_notebook_runs(kernel):
    nb = kernel.execute(setup_notebook())
    assert "gave the right answer" in "".join(text_of(c) for c in nb.cells if c.cell_type == "code")


def test_reference_notebook_runs_and_prints_what_it_says(kernel):
    import torch

    nb = kernel.execute(reference_notebook())
    printed = "".join(text_of(c) for c in nb.cells if c.cell_type == "code")
    if not torch.cuda.is_available():  # the interpreter's print, as the page quotes it
        quoted = "pid [1] offs [4 5 6 7] mask [ True  True False False] x [4. 5. 0. 0.]"
        assert quoted in printed and quoted in (ROOT / "notebooks" / "src" / "reference.md").read_text()


@pytest.mark.parametrize("puzzle", puzzle_params())
def test_notebook_runs_and_its_check_passes_with_the_answer(puzzle, kernel, machine_mode):
    """The notebook filled with its answer key runs, and its check passes every case on this machine's mode: the
    answer key's own test (tests/test_answer_key.py grades it directly where Jupyter is missing)."""
    filled = build_notebook(
        puzzle,
        puzzle.notebook_source.read_text(encoding="utf-8"),
        puzzle.solution.read_text(encoding="utf-8"),
        filled=True,
    )
    nb = kernel.execute(filled)
    checks = [c for c in nb.cells if "check" in c.metadata.get("tags", [])]
    assert len(checks) == 1
    report = text_of(checks[0])
    cases = len(puzzle.cases.on(gpu=machine_mode == "gpu"))
    assert f"PASSED: all {cases} cases match the reference" in report, report
    assert ("graded in Triton's CPU interpreter" in report) == (machine_mode == "interpreter"), report


def test_a_notebook_sees_nothing_the_notebook_before_it_left_in_the_kernel(kernel):
    cell = nbformat.v4.new_code_cell
    kernel.execute(nbformat.v4.new_notebook(cells=[cell("left_behind = 1\nimport os\nos.chdir('/')")]))
    nb = kernel.execute(nbformat.v4.new_notebook(cells=[cell("import os\nprint(len(In), os.getcwd())")]))
    assert text_of(nb.cells[0]).split() == ["2", str(NOTEBOOKS)]  # its own history only, in the notebooks folder
    with pytest.raises(CellExecutionError, match="NameError"):
        kernel.execute(nbformat.v4.new_notebook(cells=[cell("left_behind")]))
