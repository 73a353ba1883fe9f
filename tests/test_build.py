"""Generated notebooks and the README table stay in sync with their sources, and carry no outputs."""

from __future__ import annotations

import json

import pytest

from checks.authoring import build
from checks.engine.source import STUB_MARKER, graded_cells, make_stub
from checks.registry import ROOT
from tests.conftest import puzzle_params


def test_generated_files_are_in_sync():
    stale = [path for path, text in build.generated().items() if not path.exists() or path.read_text() != text]
    assert not stale, f"run `make notebooks` and commit: {[str(p.relative_to(ROOT)) for p in stale]}"


def test_build_check_reports_drift(tmp_path, monkeypatch, capsys):
    readme = tmp_path / "README.md"
    readme.write_text((ROOT / "README.md").read_text().replace("| 1 |", "| one |"))
    monkeypatch.setattr(build, "ROOT", tmp_path)
    (tmp_path / "notebooks" / "src").mkdir(parents=True)
    (tmp_path / "notebooks" / "src" / "00_setup.md").write_text((ROOT / "notebooks/src/00_setup.md").read_text())
    monkeypatch.setattr(build, "generated", lambda: {readme: build.readme_text(readme.read_text())})
    assert build.main(["--check"]) == 1
    assert "make notebooks" in capsys.readouterr().err


@pytest.mark.parametrize("puzzle", puzzle_params())
def test_notebook_is_clean_and_has_one_graded_cell(puzzle):
    notebook = json.loads(puzzle.notebook.read_text())
    ids = [cell["id"] for cell in notebook["cells"]]
    assert len(ids) == len(set(ids)), "cell ids are unique"
    code = [cell for cell in notebook["cells"] if cell["cell_type"] == "code"]
    assert all(cell["outputs"] == [] and cell["execution_count"] is None for cell in code)
    sources = ["".join(cell["source"]) for cell in code]
    graded = graded_cells(sources, puzzle.number)
    assert len(graded) == 1
    assert graded[0].startswith(STUB_MARKER.format(number=puzzle.number))
    assert any(f"check({puzzle.literal})" in s for s in sources)
    assert "data:image" not in puzzle.notebook.read_text(), "pictures are files or code, never base64"


def test_stub_replaces_blocks_by_size():
    source = '''import triton


@triton.jit
def k(x_ptr):
    ### BEGIN SOLUTION
    a = 1
    # a comment is not a line to write
    b = 2
    ### END SOLUTION


def host(x):
    """doc"""
    ### BEGIN SOLUTION
    return x
    ### END SOLUTION
'''
    stub = make_stub(source, 9)
    assert "    # FILL ME IN (roughly 2 lines)\n    pass" in stub
    assert '    # FILL ME IN (roughly 1 lines)\n    raise NotImplementedError("Puzzle 9: fill in host")' in stub
    assert "a = 1" not in stub and "return x" not in stub


def test_unclosed_marker_is_an_error():
    with pytest.raises(ValueError, match="without"):
        make_stub("### BEGIN SOLUTION\nx = 1\n", 1)


def test_parse_splits_markdown_and_fences():
    blocks = build.parse("# T\n\ntext\n<!-- cell -->\nmore\n```python\nx = 1\n```\n```{stub}\n```\n```{check}\n```\n")
    assert [k for k, _ in blocks] == ["markdown", "markdown", "python", "stub", "check"]


def test_figures_are_drawn_and_in_sync():
    from checks.authoring import figures

    assert figures.stale() == [], "run `make notebooks` and commit the figures"


def test_figure_drift_is_detected(tmp_path):
    import shutil

    from checks.authoring import figures

    folder = tmp_path / "figures"
    shutil.copytree(figures.FOLDER, folder)
    assert figures.stale(folder) == []
    png = folder / f"{figures.FIGURES[0].name}.png"
    png.write_bytes(png.read_bytes() + b"edited")
    (folder / f"{figures.FIGURES[1].name}.png").unlink()
    assert len(figures.stale(folder)) == 2
