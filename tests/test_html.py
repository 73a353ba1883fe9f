"""`make html`: every notebook becomes a page, listed by an index."""

from __future__ import annotations

import sys

from checks import html
from checks.registry import ROOT


def test_every_notebook_is_rendered_and_indexed(tmp_path, capsys):
    assert html.main(["--out", str(tmp_path)]) == 0
    notebooks = sorted((ROOT / "notebooks").glob("*.ipynb"))
    assert notebooks
    index = (tmp_path / "index.html").read_text(encoding="utf-8")
    for nb in notebooks:
        page = tmp_path / f"{nb.stem}.html"
        assert page.exists() and page.stat().st_size > 10_000, page
        title = html.title_of(nb)
        assert title in page.read_text(encoding="utf-8")
        assert f'href="{nb.stem}.html"' in index
    assert "open" in capsys.readouterr().out


def test_a_missing_nbconvert_is_explained(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "nbconvert", None)  # makes `import nbconvert` fail
    assert html.main(["--out", str(tmp_path)]) == 1
    assert "nbconvert is not installed" in capsys.readouterr().err
    assert not (tmp_path / "index.html").exists()
