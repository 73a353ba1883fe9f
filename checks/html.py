"""`make html` (`python -m checks.html [--out DIR]`): the notebooks as web pages, for reading without Jupyter.

Renders every notebooks/*.ipynb to build/html/<name>.html with nbconvert, as committed (nothing
is executed, so the pages show the lessons and the stubs, no outputs), and writes an index.html
that lists them in course order. Exit status: 0 when the pages were written, 1 when nbconvert is
missing or a notebook cannot be rendered, 2 for a usage error.
"""

from __future__ import annotations

import argparse
import html
import re
import sys
from pathlib import Path

from checks.registry import ROOT, load_puzzles

DEFAULT_OUT = ROOT / "build" / "html"
NOTEBOOKS = ROOT / "notebooks"


def title_of(path: Path) -> str:
    """The notebook's first markdown heading, or its file name."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            match = re.search(r"^#\s+(.+)$", cell.source, re.MULTILINE)
            if match:
                return match.group(1).strip()
    return path.stem


def render(notebook: Path, out_dir: Path, exporter) -> Path:
    import nbformat

    nb = nbformat.read(notebook, as_version=4)
    body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": notebook.stem}})
    target = out_dir / f"{notebook.stem}.html"
    target.write_text(body, encoding="utf-8")
    return target


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
        "<p>The course notebooks, as committed (no outputs). To run them and check your answers, open them in "
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
    parser = argparse.ArgumentParser(prog="python -m checks.html", description="Render the notebooks to HTML.")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where to write the pages (default: build/html)")
    args = parser.parse_args(argv)
    try:
        from nbconvert import HTMLExporter
    except ImportError:
        print("nbconvert is not installed, so the notebooks cannot be rendered: run `make env-dev` "
              "(or `pip install nbconvert`), then `make html` again.", file=sys.stderr)
        return 1
    notebooks = sorted(NOTEBOOKS.glob("*.ipynb"))
    if not notebooks:
        print(f"There are no notebooks in {NOTEBOOKS}: run `make notebooks` first.", file=sys.stderr)
        return 1
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    exporter = HTMLExporter()
    entries = []
    for notebook in notebooks:
        try:
            target = render(notebook, out, exporter)
        except Exception as exc:  # noqa: BLE001 - one unreadable notebook: say which, stop
            print(f"Could not render {notebook.name} ({type(exc).__name__}: {exc}); regenerate it with "
                  "`make notebooks` and try again.", file=sys.stderr)
            return 1
        entries.append((target.name, title_of(notebook)))
        print(f"  {target}")
    rendered = {n.name for n in notebooks}
    planned = [f"{p.number}. {p.title}" for p in load_puzzles() if p.notebook.name not in rendered]
    index = out / "index.html"
    index.write_text(index_page(entries, planned), encoding="utf-8")
    print(f"{len(entries)} notebook(s) rendered; open {index} in a browser.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
