"""`make html` (`python -m checks.instructor.html [--out DIR] [--no-figures]`): the notebooks as web pages, offline.

Renders every course notebook to build/html/<name>.html with nbconvert and writes an index.html
that lists them in course order (the setup notebook, then `puzzles.yaml`'s order, lettered steps
before their puzzle). The notebooks are built from their sources (`notebooks/src/` and the answer
keys' stubs, as `make notebooks` builds them), never read from `notebooks/`, where a learner's
answers live: the pages can be published. The pages work without a network and without Jupyter:

- maths ($...$ and $$...$$ in the lessons) is turned into MathML with latex2mathml when the page is
  written, which browsers draw themselves, so no MathJax is fetched from a CDN;
- the lesson figures are drawn by running the lesson cells in Triton's CPU interpreter
  (`checks.instructor.html_figures`; never the graded cell or a check) and put under the cells that draw them;
  `--no-figures` leaves them out, and a page then says where to see them;
- the pictures of `notebooks/figures/` (recorded measurements, diagrams) are copied beside the pages;
- every page links back to the index, to the previous notebook and on to the next one; a link to another
  notebook (`reference.ipynb`, which every lesson links to) leads to its page.

Nothing else is executed, so the pages show the lessons and the stubs. Exit status: 0 when the
pages were written, 1 when nbconvert is missing or a notebook cannot be rendered, 2 for a usage error.
"""

from __future__ import annotations

import argparse
import hashlib
import html
import os
import re
import shutil
import sys
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from checks.registry import ROOT, load_puzzles

DEFAULT_OUT = ROOT / "build" / "html"
FIGURES = ROOT / "notebooks" / "figures"  # recorded measurements and diagrams, no answers: copied beside the pages
# nbconvert's lab template without the scripts it fetches from a CDN: MathJax (the maths is MathML
# already), require.js and mermaid (for widgets and diagrams in cells, which the course does not use)
TEMPLATE = "{%- extends 'lab/index.html.j2' -%}\n" + "".join(
    f"{{%- block {name} -%}}{{%- endblock {name} -%}}\n"
    for name in ("html_head_js_mathjax", "html_head_js_requirejs", "html_head_js_mermaidjs")
)
_CODE = re.compile(r"(```.*?```|`[^`\n]*`)", re.DOTALL)  # fenced blocks and code spans: never maths
_DISPLAY = re.compile(r"\$\$(.+?)\$\$", re.DOTALL)
_INLINE = re.compile(r"(?<![\\$])\$(?!\s)((?:[^$\n]|\n(?!\s*\n))+?)(?<!\s)\$(?!\$)")  # may wrap a line
_NOTEBOOK_LINK = re.compile(r'href="([\w.-]+)\.ipynb(#[^"]*)?"')  # a link to a notebook beside this one
FROM_SOURCES = (
    "The course notebooks, built from their sources (notebooks/src/ and the answer keys' stubs), "
    "never from the notebooks/ folder where a learner's answers live: lessons and empty graded cells, no outputs."
)
NAV_STYLE = (
    "<style>.course-nav{font-family:system-ui,sans-serif;max-width:1100px;margin:0.6em auto;padding:0.4em 1em;"
    "display:flex;justify-content:space-between;gap:1em}.course-nav a{text-decoration:none}</style>"
)


def _mathml(latex: str, display: str) -> str | None:
    from latex2mathml.converter import convert

    try:
        return convert(latex.strip(), display=display)
    except Exception:  # noqa: BLE001 - an expression latex2mathml cannot read stays as its source
        return None


def math_to_mathml(markdown: str) -> str:
    """Markdown with every $$...$$ and $...$ outside code replaced by MathML (left as is when unreadable)."""

    def display(match: re.Match) -> str:
        ml = _mathml(match.group(1), "block")
        return f'\n\n<div class="math-display">{ml}</div>\n\n' if ml else match.group(0)

    def inline(match: re.Match) -> str:
        return _mathml(match.group(1), "inline") or match.group(0)

    parts = _CODE.split(markdown)
    for i in range(0, len(parts), 2):  # the even parts are outside code
        parts[i] = _INLINE.sub(inline, _DISPLAY.sub(display, parts[i]))
    return "".join(parts)


def navigation(index: str, following: tuple[str, str] | None, previous: tuple[str, str] | None = None) -> str:
    """The bar at the top and bottom of a page: back to the index and the previous notebook, on to the next."""
    ahead = (
        f'<a href="{html.escape(following[0])}">next: {html.escape(following[1])} &rarr;</a>'
        if following
        else "<span>the last notebook</span>"
    )
    back = f'<a href="{html.escape(previous[0])}">&larr; previous: {html.escape(previous[1])}</a>' if previous else ""
    return f'<nav class="course-nav"><a href="{html.escape(index)}">&uarr; all notebooks</a>{back}{ahead}</nav>'


def course_notebooks() -> list[tuple[Path, str]]:
    """(path, text) of every course notebook as its sources give it, in course order (never the working copy)."""
    from checks.authoring import build

    return [(path, text) for path, text in build.generated().items() if path.suffix == ".ipynb"]


def _read(notebook: Path | str):
    """A notebook node from a path, or from a notebook's JSON text."""
    import nbformat

    if isinstance(notebook, Path):
        return nbformat.read(notebook, as_version=4)
    return nbformat.reads(notebook, as_version=4)


def title_of(notebook: Path | str, name: str = "") -> str:
    """The notebook's first markdown heading, or its file name (a path, or the notebook's text and its name)."""
    nb = _read(notebook)
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            match = re.search(r"^#\s+(.+)$", cell.source, re.MULTILINE)
            if match:
                return match.group(1).strip()
    return notebook.stem if isinstance(notebook, Path) else name


def exporter():
    """nbconvert's HTML exporter, with the lab template minus MathJax."""
    from jinja2 import DictLoader
    from nbconvert import HTMLExporter

    return HTMLExporter(extra_loaders=[DictLoader({"offline.html.j2": TEMPLATE})], template_file="offline.html.j2")


def draw_figures(notebook: Path | str) -> tuple[dict[int, list[str]], str]:
    """The lesson figures of one notebook, a path or its text (see `checks.instructor.html_figures`)."""
    from checks.instructor import html_figures as lesson_figures

    return lesson_figures.draw(_read(notebook).cells)


def render(
    notebook: Path,
    out_dir: Path,
    exporter,
    following: tuple[str, str] | None = None,
    figures: bool | tuple[dict[int, list[str]], str] = True,
    previous: tuple[str, str] | None = None,
    text: str | None = None,
) -> tuple[Path, str]:
    """Write one page; returns it and a sentence when its figures could not be drawn.

    `figures` is True (draw them now), False (leave them out) or what `draw_figures` returned; with
    `text`, the page is drawn from that notebook JSON (the sources' version) and `notebook` only names it.
    """
    import nbformat

    from checks.instructor import html_figures as lesson_figures

    nb = _read(notebook if text is None else text)
    drawn, note = draw_figures(notebook if text is None else text) if figures is True else figures or ({}, "")
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            cell.source = math_to_mathml(cell.source)
        elif cell.cell_type == "code" and index in drawn:
            cell.outputs = [nbformat.v4.new_output("display_data", data={"image/png": png}) for png in drawn[index]]
        elif cell.cell_type == "code" and lesson_figures.draws(cell.source) and not figures:
            cell.outputs = [
                nbformat.v4.new_output("stream", name="stdout", text="(Run this cell in Jupyter to see its figure.)\n")
            ]
    body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": notebook.stem}})
    body = _NOTEBOOK_LINK.sub(lambda m: f'href="{m.group(1)}.html{m.group(2) or ""}"', body)
    nav = navigation("index.html", following, previous)
    body = re.sub(r"(<body[^>]*>)", lambda m: m.group(1) + "\n" + nav, body, count=1)
    body = body.replace("</body>", nav + "\n</body>", 1).replace("</head>", NAV_STYLE + "\n</head>", 1)
    target = out_dir / f"{notebook.stem}.html"
    target.write_text(body, encoding="utf-8")
    return target, note


def page_key(text: str, nav: tuple[tuple[str, str] | None, tuple[str, str] | None], figures: bool) -> str:
    """What a page is made from: its notebook's text, its neighbours, whether figures are drawn, and the code and
    versions that draw it. A page whose key is unchanged since it was written is kept."""
    from importlib.metadata import PackageNotFoundError, version

    digest = hashlib.sha256(text.encode())
    digest.update(repr((nav, figures)).encode())
    here = Path(__file__).parent
    for code in (here / "html.py", here / "html_figures.py"):
        digest.update(code.read_bytes() if code.exists() else b"")
    for package in ("nbconvert", "latex2mathml", "torch", "triton", "matplotlib"):
        try:
            digest.update(f"{package}={version(package)}".encode())
        except PackageNotFoundError:
            digest.update(package.encode())
    return digest.hexdigest()


def key_file(out: Path, notebook: Path) -> Path:
    return out / ".keys" / f"{notebook.stem}.sha256"


def up_to_date(out: Path, notebook: Path, key: str) -> bool:
    page, stored = out / f"{notebook.stem}.html", key_file(out, notebook)
    if not (page.exists() and stored.exists()):
        stored.parent.mkdir(parents=True, exist_ok=True)
        return False
    return stored.read_text(encoding="utf-8") == key


def index_page(entries: list[tuple[str, str]], planned: list[str]) -> str:
    """index.html: a link per rendered notebook (file name, title), then the puzzles without a notebook yet."""
    items = "\n".join(f'  <li><a href="{html.escape(href)}">{html.escape(title)}</a></li>' for href, title in entries)
    later = "\n".join(f"  <li>{html.escape(t)}</li>" for t in planned)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        '<head><meta charset="utf-8"><title>Triton puzzles</title>',
        "<style>body{font-family:system-ui,sans-serif;max-width:46em;margin:2em auto;line-height:1.5}</style>",
        "</head>",
        "<body>",
        "<h1>Triton puzzles: from vector add to FlashAttention-2</h1>",
        f"<p>{html.escape(FROM_SOURCES)} To run them and check your answers, open them in "
        "Jupyter (<code>make lab</code>) and use <code>make check PUZZLE=N</code>.</p>",
        "<ul>",
        items,
        "</ul>",
    ]
    if later:
        parts += ["<h2>Coming later (no notebook yet)</h2>", "<ul>", later, "</ul>"]
    parts += ["</body>", "</html>", ""]
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m checks.instructor.html", description="Render the notebooks to HTML."
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where to write the pages (default: build/html)")
    parser.add_argument(
        "--no-figures",
        action="store_true",
        help="do not run the lesson cells that draw figures (faster; the pages say where to see them)",
    )
    args = parser.parse_args(argv)
    try:
        import latex2mathml  # noqa: F401
        import nbconvert  # noqa: F401
    except ImportError as exc:
        print(
            f"{exc.name} is not installed, so the notebooks cannot be rendered: run `make env-dev` "
            f"(or `pip install -r requirements-dev.txt`), then `make html` again.",
            file=sys.stderr,
        )
        return 1
    course = course_notebooks()
    notebooks = [path for path, _ in course]
    texts = dict(course)
    print(FROM_SOURCES, flush=True)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    if FIGURES.is_dir():  # the lessons show them as figures/<name>.png
        shutil.copytree(FIGURES, out / "figures", dirs_exist_ok=True, ignore=shutil.ignore_patterns("*.json"))
    titles = [title_of(texts[notebook], notebook.stem) for notebook in notebooks]
    nav = [
        (
            (f"{notebooks[i + 1].stem}.html", titles[i + 1]) if i + 1 < len(notebooks) else None,
            (f"{notebooks[i - 1].stem}.html", titles[i - 1]) if i > 0 else None,
        )
        for i in range(len(notebooks))
    ]
    keys = {n: page_key(texts[n], nav[i], figures=not args.no_figures) for i, n in enumerate(notebooks)}
    stale = [n for n in notebooks if not up_to_date(out, n, keys[n])]
    kept = len(notebooks) - len(stale)
    if kept:
        print(f"{kept} of {len(notebooks)} page(s) unchanged since the last make html: kept.", flush=True)
    drawn: dict[Path, tuple[dict[int, list[str]], str]] = {}
    if stale and not args.no_figures:
        print(
            f"Drawing the lesson figures of {len(stale)} notebook(s) (running their cells in Triton's interpreter):",
            flush=True,
        )
        with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as pool:  # each runs in a child process
            futures = {pool.submit(draw_figures, texts[n]): n for n in stale}
            for done, future in enumerate(as_completed(futures), 1):
                drawn[futures[future]] = future.result()
                print(f"  [{done}/{len(stale)}] figures of {futures[future].stem}", flush=True)
    pages = exporter() if stale else None
    if stale:
        print(f"Rendering {len(stale)} page(s):", flush=True)
    entries = []
    for i, notebook in enumerate(notebooks):
        entries.append((f"{notebook.stem}.html", titles[i]))
        if notebook not in stale:
            continue
        following, previous = nav[i]
        try:
            target, note = render(
                notebook, out, pages, following, drawn.get(notebook, False), previous, text=texts[notebook]
            )
        except Exception as exc:  # noqa: BLE001 - one unreadable notebook: say which, stop
            print(
                f"Could not render {notebook.name} ({type(exc).__name__}: {exc}); check its source in "
                "notebooks/src/ (`make notebooks` says what is wrong with it) and try again.",
                file=sys.stderr,
            )
            return 1
        print(f"  [{stale.index(notebook) + 1}/{len(stale)}] {target}", flush=True)
        if note:
            print(f"    its figures are missing: {note}; run `make doctor`, then `make html` again.")
        else:  # a page whose figures are missing is drawn again next time
            key_file(out, notebook).write_text(keys[notebook], encoding="utf-8")
    rendered = {n.name for n in notebooks}
    planned = [f"{p.number}. {p.title}" for p in load_puzzles() if p.notebook.name not in rendered]
    index = out / "index.html"
    index.write_text(index_page(entries, planned), encoding="utf-8")
    print(f"{len(stale)} page(s) rendered, {kept} kept; open {index} in a browser.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
