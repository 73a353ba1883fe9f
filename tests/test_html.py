"""`make html`: every notebook becomes a page that works offline, linked to the index and the next page."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from checks.instructor import html
from checks.registry import ROOT

pytestmark = pytest.mark.slow  # every test here grades, runs notebooks or renders
# the tests that share the module's `rendered` fixture run on one worker (`make test` passes `--dist loadgroup`), so
# that it is built once rather than once per worker
ONE_WORKER = pytest.mark.xdist_group("html_rendered")

# rendering needs the dev requirements (nbconvert, latex2mathml), which a GPU machine without network lacks
needs_nbconvert = pytest.mark.skipif(
    any(__import__("importlib").util.find_spec(m) is None for m in ("nbconvert", "nbformat", "latex2mathml")),
    reason="rendering notebooks needs nbconvert, nbformat and latex2mathml (make env-dev)",
)


def course_order() -> list[str]:
    """The notebook stems in course order, from puzzles.yaml: the setup notebook, then every ready puzzle's."""
    from checks.registry import load_puzzles

    return ["00_setup"] + [p.notebook.stem for p in load_puzzles() if p.ready]


def test_pages_come_in_course_order_from_puzzles_yaml():
    stems = [path.stem for path, _ in html.course_notebooks()]
    assert stems[: len(course_order())] == course_order()
    assert (
        stems.index("10a_softmax_backward")
        < stems.index("10b_flash_attention_v2_bwd_dkdv")
        < stems.index("10_flash_attention_v2_bwd")
    )


SECRET = "# MY SECRET ANSWER\ndef vector_add(x, y):\n    return x\n"


def learners_answer_on_disk(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """notebooks/01_vector_add.ipynb, the learner's working copy, holds an answer (its stub cell is SECRET) from now
    on; what reads it is listed in the list returned, and reading it through nbformat fails the test."""
    import json

    from checks.registry import get_puzzle

    notebook = json.loads(get_puzzle(1).notebook.read_text(encoding="utf-8"))
    for cell in notebook["cells"]:
        if "stub" in cell["metadata"].get("tags", []):
            cell["source"] = SECRET
    mine = json.dumps(notebook)
    working_copy = get_puzzle(1).notebook
    read_text, read = Path.read_text, []

    def learners_disk(self: Path, *args, **kwargs) -> str:
        if self.resolve() == working_copy.resolve():
            read.append(self)
            return mine
        return read_text(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", learners_disk)
    monkeypatch.setattr("nbformat.read", lambda *a, **k: pytest.fail("make html read a notebook file"))
    return read


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    """One make html of every page (about 20 s) for the tests that read the pages, made while the learner's working
    copy of notebook 1 holds an answer: (the pages' folder, what make html printed, the working copies it read)."""
    import contextlib
    import io

    out, printed = tmp_path_factory.mktemp("html"), io.StringIO()
    with pytest.MonkeyPatch.context() as monkeypatch, contextlib.redirect_stdout(printed):
        read = learners_answer_on_disk(monkeypatch)
        assert html.main(["--out", str(out), "--no-figures"]) == 0
    return out, printed.getvalue(), read


@needs_nbconvert
@ONE_WORKER
def test_every_notebook_is_rendered_indexed_and_linked_in_course_order(rendered):
    out_dir, out, _ = rendered
    stems = [path.stem for path, _ in html.course_notebooks()]
    index = (out_dir / "index.html").read_text(encoding="utf-8")
    links = re.findall(r'<li><a href="([^"]+)\.html">', index)
    assert links == stems, "the index lists the notebooks in course order"
    for i, stem in enumerate(stems):
        page = out_dir / f"{stem}.html"
        assert page.exists() and page.stat().st_size > 10_000, page
        text = page.read_text(encoding="utf-8")
        assert text.count('href="index.html"') == 2  # at the top and at the bottom
        if i + 1 < len(stems):
            assert f'href="{stems[i + 1]}.html">next: ' in text
        else:
            assert "the last notebook" in text
        if i > 0:
            assert f'href="{stems[i - 1]}.html">&larr; previous: ' in text
        assert "cdnjs" not in text and "MathJax.Hub" not in text  # nothing fetched for the maths
        if stem != "reference":
            assert 'href="reference.html"' in text and 'href="reference.ipynb"' not in text  # the link leads to a page
    assert (out_dir / "figures" / "memory_hierarchy.png").exists()  # the pages' pictures are beside them
    assert "open" in out and "built from their sources" in out and "built from their sources" in index


@needs_nbconvert
@ONE_WORKER
def test_a_learners_answer_never_reaches_the_pages(rendered, monkeypatch):
    """make html renders the sources, not the notebooks/ folder where the learner's answers are."""
    out, _, read = rendered
    real = html.course_notebooks()
    learners_answer_on_disk(monkeypatch)
    assert html.course_notebooks() == real
    assert "MY SECRET ANSWER" not in (out / "01_vector_add.html").read_text(encoding="utf-8")
    assert not read, "make html read the working copy of a notebook"


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
    assert "previous:" not in text


def test_a_missing_nbconvert_is_explained(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "nbconvert", None)  # makes `import nbconvert` fail
    assert html.main(["--out", str(tmp_path)]) == 1
    assert "nbconvert is not installed" in capsys.readouterr().err
    assert not (tmp_path / "index.html").exists()


@needs_nbconvert
@ONE_WORKER
def test_a_second_make_html_keeps_the_pages_that_did_not_change(rendered, tmp_path, monkeypatch, capsys):
    import shutil

    shutil.copytree(rendered[0], tmp_path, dirs_exist_ok=True)  # the pages of a first make html, and their keys
    first = rendered[1]
    count = len(html.course_notebooks())
    assert f"Rendering {count} page(s):" in first and f"[{count}/{count}]" in first  # it says how far it is
    assert html.main(["--out", str(tmp_path), "--no-figures"]) == 0
    second = capsys.readouterr().out
    assert f"{count} of {count} page(s) unchanged" in second and "Rendering" not in second
    course = html.course_notebooks()
    changed = [(path, text + "\n" if i == 1 else text) for i, (path, text) in enumerate(course)]  # one source edited
    monkeypatch.setattr(html, "course_notebooks", lambda: changed)
    assert html.main(["--out", str(tmp_path), "--no-figures"]) == 0
    third = capsys.readouterr().out
    assert "Rendering 1 page(s):" in third and course[1][0].stem in third
