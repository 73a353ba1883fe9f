"""`make html`: every notebook becomes a page that works offline, linked to the index and the next page."""

from __future__ import annotations

import re
import sys

import pytest

from checks.instructor import html
from checks.registry import ROOT

pytestmark = pytest.mark.slow  # every test here grades, runs notebooks or renders

# rendering needs the dev requirements (nbconvert, latex2mathml), which a GPU machine without network lacks
needs_nbconvert = pytest.mark.skipif(
    any(__import__("importlib").util.find_spec(m) is None for m in ("nbconvert", "nbformat", "latex2mathml")),
    reason="rendering notebooks needs nbconvert, nbformat and latex2mathml (make env-dev)",
)

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


@needs_nbconvert
def test_every_notebook_is_rendered_indexed_and_linked_to_the_next(tmp_path, capsys):
    assert html.main(["--out", str(tmp_path), "--no-figures"]) == 0
    assert NOTEBOOKS
    index = (tmp_path / "index.html").read_text(encoding="utf-8")
    for i, nb in enumerate(NOTEBOOKS):
        page = tmp_path / f"{nb.stem}.html"
        assert page.exists() and page.stat().st_size > 10_000, page
        text = page.read_text(encoding="utf-8")
        assert html.title_of(nb) in text
        assert f'href="{nb.stem}.html"' in index
        assert text.count('href="index.html"') == 2  # at the top and at the bottom
        if i + 1 < len(NOTEBOOKS):
            assert f'href="{NOTEBOOKS[i + 1].stem}.html">next: ' in text
        assert "cdnjs" not in text and "MathJax.Hub" not in text  # nothing fetched for the maths
    assert "open" in capsys.readouterr().out


@needs_nbconvert
def test_the_maths_is_mathml_and_code_is_left_alone():
    out = html.math_to_mathml("max $m_j$ of `$x$`, costs $5 and $6;\n\n$$\\sum_j e^{x_j}$$\n")
    assert out.count("<math") == 2 and 'display="block"' in out
    assert "`$x$`" in out and "costs $5 and $6;" in out
    wrapped = html.math_to_mathml("the sum $d_{j-1}\\, e^{m_{j-1}\n- m_j}$ here")
    assert "<math" in wrapped and "$" not in wrapped


@needs_nbconvert
def test_a_page_shows_its_lesson_figures_and_rendered_maths(tmp_path):
    notebook = ROOT / "notebooks" / "07_softmax_online.ipynb"
    target, note = html.render(notebook, tmp_path, html.exporter(), ("08.html", "next one"))
    text = target.read_text(encoding="utf-8")
    assert note == ""
    assert len(re.findall(r'<img[^>]+src="data:image/png;base64,', text)) >= 1
    assert text.count("<math") > 10 and "\\sum" not in text.split("<body")[1].split("<pre")[0]


@needs_nbconvert
def test_without_figures_a_page_says_where_to_see_them(tmp_path):
    notebook = ROOT / "notebooks" / "06_softmax_blocked.ipynb"
    target, _ = html.render(notebook, tmp_path, html.exporter(), None, figures=False)
    text = target.read_text(encoding="utf-8")
    assert "Run this cell in Jupyter to see its figure." in text and "the last notebook" in text


def test_a_missing_nbconvert_is_explained(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "nbconvert", None)  # makes `import nbconvert` fail
    assert html.main(["--out", str(tmp_path)]) == 1
    assert "nbconvert is not installed" in capsys.readouterr().err
    assert not (tmp_path / "index.html").exists()
