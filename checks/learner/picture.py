"""Draw where an output is wrong: a heat map of |yours - expected|, one cell per element.

When a case fails with wrong or unwritten values, the judge saves the error map of
that output (see `Judge.save_picture` in `checks/engine/judging/judge.py`): a torch file with the keys
error (float64 |yours - expected|, NaN where unwritten or NaN), bad (bool), dims (a word per
dimension), name, case, headline and blocks (the BLOCK_* constants the kernel was launched with,
when they were passed by keyword). This module turns it into a PNG:

- a 1-D output is folded into rows; when BLOCK_SIZE is known each row is one block, so a tail
  the grid or the mask misses is a short last row, and a wrong offset shows in every row;
- a 2-D output is drawn as it is, with the BLOCK_M x BLOCK_N grid (or BLOCK_SIZE along the
  columns) drawn over it, so a missing mask is a stripe along one edge and a wrong stride a pattern;
- a 3-D or 4-D output shows the (rows, columns) slice of the first batch/head with a wrong
  element, with BLOCK_M along its rows (the last dimension, such as an attention head's, is
  handled whole by one program).

Colours: right elements are light grey, wrong ones coloured by the size of the error, elements
never written red, and elements written as NaN or inf purple (two different bugs: a store that
misses, and arithmetic that blows up). When the report found one factor per row (`ratio`, yours /
expected: a wrong normaliser), a second panel shows that ratio, constant along each row. Large
outputs are shrunk by showing the worst element of each patch, so a single wrong element never
disappears. A write past the end of an output (`kind: overhang`) is drawn as the tensor's elements
in memory order, grey, followed by the elements past its end, orange where written.

`python -m checks.learner.picture ERRORS.pt OUT.png` draws a saved file; the grader calls `save_png`.
"""

from __future__ import annotations

import math
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from checks.engine.judging.rules.pictures import OVERHANG
from checks.verdict import plural

PAST_END, RIGHT, WRONG, UNWRITTEN, OUTSIDE, NONFINITE = 0, 1, 2, 3, 4, 5  # categories; a larger one wins when merged
COLOURS = {
    PAST_END: "#ffffff",
    RIGHT: "#e4e4e4",
    WRONG: "#35b779",
    UNWRITTEN: "#d62728",
    OUTSIDE: "#ff7f0e",
    NONFINITE: "#9467bd",
}
MAX_ROWS, MAX_COLS = 256, 512  # cells drawn at most; larger outputs are shrunk patch by patch
MAX_GRID_LINES = 128  # a block grid finer than this would hide the picture, so it is left out
MAX_RINGS = 40  # when only this many cells are wrong, each gets a ring around it


@dataclass
class Layout:
    """What is drawn: a 2-D error map, its categories, and how it relates to the output."""

    error: np.ndarray  # float, the error of each drawn element (NaN where not a plain wrong value)
    category: np.ndarray  # int8, PAST_END / RIGHT / WRONG / UNWRITTEN
    row_label: str
    col_label: str
    where: str  # which part of the output is shown, for the title ('' when all of it)
    row_block: int | None = None  # draw a grid line every this many rows
    col_block: int | None = None  # ... and every this many columns
    grid_note: str = ""  # the block constants, as shown in the title


def load(path: Path | str) -> dict[str, Any]:
    """Read a picture file written by the grading process."""
    import torch

    return torch.load(Path(path), map_location="cpu", weights_only=True)


def _categories(error: np.ndarray, bad: np.ndarray) -> np.ndarray:
    """RIGHT, WRONG, UNWRITTEN (error NaN) or NONFINITE (error inf: a NaN or inf was written; see `layout_for`)."""
    category = np.full(error.shape, RIGHT, dtype=np.int8)
    category[bad] = WRONG
    category[bad & np.isnan(error)] = UNWRITTEN
    category[bad & np.isinf(error)] = NONFINITE
    return category


def _fold_width(n: int, block: int | None) -> tuple[int, str]:
    """How many elements per row when a 1-D output is folded, and what one row is."""
    if block and block > 0 and math.ceil(n / block) <= MAX_ROWS and block <= 4 * MAX_COLS:
        return block, "block"
    width = 1
    while width * width < 4 * n and width < 1024:  # about four times wider than tall
        width *= 2
    return width, "row"


def fold_1d(error: np.ndarray, bad: np.ndarray, block: int | None) -> Layout:
    """Fold a vector into rows; lanes past its end are drawn blank."""
    return _fold(error, _categories(error, bad), block)


def fold_overhang(size: int, spans: list[int], block: int | None) -> Layout:
    """A tensor's elements in memory order, then the elements past its end, orange where something was written."""
    pairs = [(int(a), int(b)) for a, b in zip(spans[0::2], spans[1::2], strict=False) if 0 <= a < b]
    end = max((b for _, b in pairs), default=0)
    category = np.full(size + end, PAST_END, dtype=np.int8)
    category[:size] = RIGHT
    for a, b in pairs:
        category[size + a : size + b] = OUTSIDE
    layout = _fold(np.full(size + end, np.nan), category, block)
    layout.col_label = layout.col_label.replace("element =", "element (in memory order) =")
    return layout


def _fold(error: np.ndarray, categories: np.ndarray, block: int | None) -> Layout:
    n = error.shape[0]
    width, row_is = _fold_width(n, block)
    rows = max(1, math.ceil(n / width))
    padded_error = np.full(rows * width, np.nan)
    padded_error[:n] = error
    category = np.full(rows * width, PAST_END, dtype=np.int8)
    category[:n] = categories
    layout = Layout(
        padded_error.reshape(rows, width),
        category.reshape(rows, width),
        row_label=row_is,
        col_label=f"offset in the {row_is} (element = {row_is} x {width} + offset)",
        where="",
    )
    if block and block != width:
        if width % block == 0:
            layout.col_block = block
        elif block % width == 0:
            layout.row_block = block // width
    elif block:
        layout.row_block = 1
    if block:
        layout.grid_note = f"grid lines: blocks of BLOCK_SIZE={block}"
        if width == block:
            layout.grid_note = f"each row is one block of BLOCK_SIZE={block}"
    return layout


def _first_bad_lead(bad: np.ndarray) -> tuple[int, ...]:
    lead = bad.reshape(bad.shape[:-2] + (-1,)).any(axis=-1)
    hits = np.argwhere(lead)
    return tuple(int(i) for i in hits[0]) if len(hits) else tuple(0 for _ in bad.shape[:-2])


def _numpy(value: Any) -> Any:
    return value.detach().cpu().numpy() if hasattr(value, "detach") else value


def layout_for(data: dict[str, Any]) -> Layout:
    """Choose what to draw for a picture file's contents."""
    if data.get("kind") == OVERHANG.name:
        blocks = data.get("blocks") or {}
        return fold_overhang(int(data["size"]), list(data.get("spans") or []), blocks.get("BLOCK_SIZE"))
    error = np.asarray(_numpy(data["error"]), dtype=float)
    bad = np.asarray(_numpy(data["bad"]), dtype=bool)
    if data.get("unwritten") is not None:  # NaN: never written; inf: written as NaN or inf
        unwritten = np.asarray(_numpy(data["unwritten"]), dtype=bool)
        error = np.where(unwritten, np.nan, np.where(np.isfinite(error), error, np.inf))
    dims = [str(d) for d in data.get("dims") or ()]
    dims += [f"dim {i}" for i in range(len(dims), error.ndim)]
    blocks = {str(k): int(v) for k, v in (data.get("blocks") or {}).items()}
    if error.ndim == 0:
        error, bad, dims = error.reshape(1), bad.reshape(1), ["element"]
    if error.ndim == 1:
        return fold_1d(error, bad, blocks.get("BLOCK_SIZE"))
    where = ""
    if error.ndim > 2:
        lead = _first_bad_lead(bad)
        slices_bad = int(bad.reshape(bad.shape[:-2] + (-1,)).any(axis=-1).sum())
        slices = int(np.prod(bad.shape[:-2]))
        at = ", ".join(f"{name} {i}" for name, i in zip(dims, lead, strict=False))
        where = f"{at}: the first of {slices_bad} of {slices} ({' x '.join(dims[:-2])}) slices with a wrong element"
        error, bad = error[lead], bad[lead]
        dims = dims[-2:]
    layout = Layout(error, _categories(error, bad), row_label=dims[0], col_label=dims[1], where=where)
    notes = []
    if "BLOCK_M" in blocks:
        layout.row_block = blocks["BLOCK_M"]
        notes.append(f"BLOCK_M={blocks['BLOCK_M']} along {dims[0]}")
    if where == "":
        col = "BLOCK_N" if "BLOCK_N" in blocks else "BLOCK_SIZE" if "BLOCK_SIZE" in blocks else None
        if col:
            layout.col_block = blocks[col]
            notes.append(f"{col}={blocks[col]} along {dims[1]}")
    if notes:
        layout.grid_note = "grid lines: " + ", ".join(notes)
    return layout


def shrink(layout: Layout) -> tuple[np.ndarray, np.ndarray, tuple[int, int]]:
    """At most MAX_ROWS x MAX_COLS cells: each keeps the worst category and error of its patch."""
    rows, cols = layout.category.shape
    fy, fx = math.ceil(rows / MAX_ROWS), math.ceil(cols / MAX_COLS)
    if fy == 1 and fx == 1:
        return layout.error, layout.category, (1, 1)
    py, px = math.ceil(rows / fy) * fy, math.ceil(cols / fx) * fx
    category = np.full((py, px), PAST_END, dtype=np.int8)
    category[:rows, :cols] = layout.category
    wrong = np.full((py, px), -np.inf)
    plain = layout.category == WRONG
    wrong[:rows, :cols][plain] = layout.error[plain]
    category = category.reshape(py // fy, fy, px // fx, fx).max(axis=(1, 3))
    wrong = wrong.reshape(py // fy, fy, px // fx, fx).max(axis=(1, 3))
    wrong[~np.isfinite(wrong)] = np.nan
    return wrong, category, (fy, fx)


def figure(data: dict[str, Any]):
    """A matplotlib Figure (Agg, no pyplot state) of where the output is wrong."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.colors import ListedColormap, LogNorm, Normalize
    from matplotlib.figure import Figure

    layout = layout_for(data)
    error, category, (fy, fx) = shrink(layout)
    rows, cols = layout.category.shape
    counts = {c: int((layout.category == c).sum()) for c in (RIGHT, WRONG, UNWRITTEN, OUTSIDE, NONFINITE)}
    ratio = data.get("ratio")

    height = min(7.0, max(3.2, 2.4 + 4.0 * rows / max(cols, 1)))
    fig = Figure(figsize=(10, height * (1.8 if ratio is not None else 1.0)), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(2, 1, 1) if ratio is not None else fig.add_subplot()
    extent = (0, cols, rows, 0)  # element coordinates, whatever the shrinking
    base = ListedColormap([COLOURS[k] for k in (PAST_END, RIGHT, RIGHT, UNWRITTEN, OUTSIDE, NONFINITE)])
    ax.imshow(category, cmap=base, vmin=-0.5, vmax=5.5, extent=extent, aspect="auto", interpolation="nearest")
    shown = np.where(category == WRONG, error, np.nan)
    finite = shown[np.isfinite(shown)]
    if finite.size:
        low, high = float(finite.min()), float(finite.max())
        norm = LogNorm(max(low, high * 1e-12), high) if low > 0 and high / low > 20 else Normalize(0.0, high)
        image = ax.imshow(
            np.ma.masked_invalid(shown),
            cmap="viridis",
            norm=norm,
            extent=extent,
            aspect="auto",
            interpolation="nearest",
        )
        fig.colorbar(image, ax=ax, label="|yours - expected|", shrink=0.9)
    _grid(ax, layout, rows, cols)
    few = np.argwhere(category >= WRONG)
    if 0 < len(few) <= MAX_RINGS and category.size >= 50 * len(few):  # ring the few wrong cells so none is missed
        ax.scatter(
            (few[:, 1] + 0.5) * fx,
            (few[:, 0] + 0.5) * fy,
            s=120,
            facecolors="none",
            edgecolors="#000000",
            linewidths=1.2,
            clip_on=False,
        )
    ax.set_xlim(0, cols)
    ax.set_ylim(rows, 0)
    _centred_ticks(ax.xaxis, cols)
    _centred_ticks(ax.yaxis, rows)
    ax.set_xlabel(layout.col_label)
    ax.set_ylabel(layout.row_label)

    ax.set_title(_title(data, layout, fy, fx), fontsize=9, loc="left")
    if ratio is not None:
        _ratio_panel(fig, data, ratio)
    handles = _legend(data, layout, counts)
    fig.legend(handles=handles, loc="outside lower center", ncols=len(handles), fontsize=8, frameon=False)
    return fig


def _ratio_panel(fig, data: dict[str, Any], ratio: Any) -> None:
    """yours / expected, drawn as the error map is (same slice and folding): constant along each row when a
    normaliser is wrong."""
    shown = layout_for({**data, "error": ratio, "unwritten": None})
    values = np.where(np.isfinite(shown.error), shown.error, np.nan)
    rows, cols = values.shape
    ax = fig.add_subplot(2, 1, 2)
    image = ax.imshow(
        np.ma.masked_invalid(values), cmap="viridis", extent=(0, cols, rows, 0), aspect="auto", interpolation="nearest"
    )
    fig.colorbar(image, ax=ax, label="yours / expected", shrink=0.9)
    _centred_ticks(ax.xaxis, cols)
    _centred_ticks(ax.yaxis, rows)
    ax.set_xlabel(shown.col_label)
    ax.set_ylabel(shown.row_label)
    ax.set_title("yours / expected: one colour per row is one wrong factor per row (a wrong normaliser)", fontsize=9,
                 loc="left")  # fmt: skip


def _title(data: dict[str, Any], layout: Layout, fy: int, fx: int) -> str:
    """The failure's headline, then the case and how to read the cells."""
    name = data.get("name", "output")
    headline = str(data.get("headline") or f"{name}: wrong values")
    sub = [f"case: {data.get('case', '?')}"]
    if layout.where:
        sub.append(f"showing {layout.where}")
    if layout.grid_note:
        sub.append(layout.grid_note)
    if fy > 1 or fx > 1:
        sub.append(f"each cell shows the worst of {fy} x {fx} elements")
    return "\n".join(textwrap.wrap(headline, 120)[:3] + textwrap.wrap("; ".join(sub), 120))


def _legend(data: dict[str, Any], layout: Layout, counts: dict[int, int]) -> list[Any]:
    from matplotlib.patches import Patch

    if data.get("kind") == OVERHANG.name:
        return [
            Patch(color=COLOURS[RIGHT], label=f"{data.get('name', 'the tensor')} ({plural(counts[RIGHT], 'element')})"),
            Patch(color=COLOURS[OUTSIDE], label=f"written past its end ({counts[OUTSIDE]})"),
            Patch(facecolor=COLOURS[PAST_END], edgecolor="#999999", label="past its end, not written"),
        ]
    handles = [Patch(color=COLOURS[RIGHT], label=f"right ({counts[RIGHT]})")]
    if counts[WRONG]:
        handles.append(Patch(color=COLOURS[WRONG], label=f"wrong value ({counts[WRONG]}; colour = size of the error)"))
    if counts[UNWRITTEN]:
        handles.append(Patch(color=COLOURS[UNWRITTEN], label=f"never written ({counts[UNWRITTEN]})"))
    if counts[NONFINITE]:
        handles.append(Patch(color=COLOURS[NONFINITE], label=f"written as NaN or inf ({counts[NONFINITE]})"))
    if (layout.category == PAST_END).any():
        handles.append(Patch(facecolor=COLOURS[PAST_END], edgecolor="#999999", label="past the end (no element)"))
    return handles


def cell_ticks(count: int, most: int = 9) -> list[int]:
    """Round element indices to label along an axis of `count` cells (at most about `most` of them)."""
    from matplotlib.ticker import MaxNLocator

    values = MaxNLocator(nbins=most, integer=True, min_n_ticks=1).tick_values(0, max(count - 1, 0))
    return sorted({int(v) for v in values if 0 <= v <= count - 1})


def _centred_ticks(axis, count: int) -> None:
    """Label element i at the centre of its cell (cell i spans i..i+1), not on its edge."""
    ticks = cell_ticks(count)
    axis.set_ticks([t + 0.5 for t in ticks], labels=[str(t) for t in ticks])


def _grid(ax, layout: Layout, rows: int, cols: int) -> None:
    """The block grid: black lines with a white halo, visible over light and dark cells alike."""
    from matplotlib import patheffects

    def style(lines: int) -> dict[str, Any]:
        width = 1.0 if lines <= 32 else 0.5  # thinner when there are many, so they do not hide the cells
        halo = patheffects.withStroke(linewidth=width + (1.6 if lines <= 32 else 0.8), foreground="#ffffff")
        return {"color": "#000000", "linewidth": width, "path_effects": [halo]}

    if layout.row_block and 0 < rows / layout.row_block <= MAX_GRID_LINES:
        for y in range(layout.row_block, rows, layout.row_block):
            ax.axhline(y, **style(rows // layout.row_block))
    if layout.col_block and 0 < cols / layout.col_block <= MAX_GRID_LINES:
        for x in range(layout.col_block, cols, layout.col_block):
            ax.axvline(x, **style(cols // layout.col_block))


def save_png(data: dict[str, Any] | Path | str, out: Path | str) -> Path:
    """Draw a picture file (or its loaded contents) to a PNG; returns the PNG's path."""
    contents = data if isinstance(data, dict) else load(data)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig = figure(contents)
    fig.savefig(out)
    return out


def draw_verdict(verdict, out: Path | str) -> tuple[Path | None, str]:
    """Draw a graded verdict's picture file to `out`: (the PNG or None, a sentence to print)."""
    if verdict.passed:
        return None, ""
    source = Path(verdict.picture_data) if verdict.picture_data else None
    if source is None or not source.exists():
        return None, (
            "No picture for this failure: it is not about wrong or unwritten output values, "
            "so the report above says all there is."
        )
    try:
        png = save_png(source, out)
    except ImportError as exc:
        return None, f"Could not draw the picture ({exc}): install matplotlib (`pip install matplotlib`) to see it."
    except Exception as exc:  # noqa: BLE001 - a picture must never hide the verdict
        return None, f"Could not draw the picture ({type(exc).__name__}: {exc}); the report above has the same facts."
    return png, f"A picture of where the output is wrong: {png}"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("Usage: python -m checks.learner.picture ERRORS.pt OUT.png", file=sys.stderr)
        return 2
    print(f"Picture saved to {save_png(args[0], args[1])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
