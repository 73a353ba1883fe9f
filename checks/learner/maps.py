"""Access maps: which program touched what, for your kernel beside the answer key's.

    python -m checks.learner.maps N [--file F | --solution] [--case K] [--seed S] [--out PNG]
    make map PUZZLE=N [FILE=...] [ARGS="--case K --seed S"]

runs the submission (by default your notebook's graded cell) and the answer key, each in a process of its
own with the puzzle's time limit, on one CPU case in Triton's interpreter (case K as a check's report numbers it,
from 1; on the shapes and integer inputs of seed S, as a check with that seed draws them) under the access
recorder (`checks.engine.access.patches`), and draws one PNG:

- puzzles 1, 2: the program that wrote each element of the output;
- puzzles 5-7: the program that wrote each element, and how many times each element of x was read;
- puzzles 3, 4: the tiles of c numbered in launch order, with the first wave's tiles outlined and
  the row-tiles of a and column-tiles of b it loads marked beside the grid (grouped vs row-major);
- puzzles 8-10: for the first (batch, head), a query-row x key-row grid of the tile pairs each
  program loaded, coloured by when in the program (dark first, light last), with the causal diagonal:
  FlashAttention-1 sweeps columns, FlashAttention-2 rows; puzzle 10 shows the dK/dV and dQ sweeps.

`show(N)` does the same from a notebook and displays the picture.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from checks.engine.access.log import LOAD, STORE, AccessLog, F
from checks.engine.access.queries import loads_of
from checks.engine.processes.access_recording import MapError, record_in_own_process
from checks.make_notes import make_note
from checks.registry import ROOT, Puzzle, UnknownPuzzle, get_puzzle, shown
from checks.verdict import plural

ELEMENTWISE, SOFTMAX, MATMUL, ATTENTION, DECODING = "elementwise", "softmax", "matmul", "attention", "decoding"
QUERY_SIDE, KEY_SIDE = ("q", "do"), ("k", "v")
QUERY_OWNERS, KEY_OWNERS = ("o", "dq"), ("dk", "dv")
WAVE = 16  # programs drawn as the first wave of a matmul


# -- reading a log ---------------------------------------------------------------------------------
def _output(log: AccessLog) -> int:
    """The first region the learner returned (named by its output name), else the most-written one."""
    named = [i for i, r in enumerate(log.regions) if r["role"] != "input" and r["name"] != r["label"]]
    if named:
        return named[0]
    return int(np.argmax(log.stored)) if log.stored else -1


def _first_input(log: AccessLog) -> str:
    """The name of the first input the kernels were given (x in softmax, y in its backward)."""
    return next((str(r["name"]) for r in log.regions if r["role"] == "input"), "x")


def _records(log: AccessLog, region: int, kind: int) -> np.ndarray:
    rows = log.records.numpy()
    return rows[(rows[:, F["region"]] == region) & (rows[:, F["kind"]] == kind)]


def _box(row: np.ndarray, ndim: int) -> tuple[slice, ...]:
    return tuple(slice(int(row[F[f"lo{d}"]]), int(row[F[f"hi{d}"]]) + 1) for d in range(ndim))


def program_map(log: AccessLog, region: int) -> np.ndarray:
    """For each element of a region's tensor, the (launch-order) program that stored it last; -1: none."""
    shape = log.regions[region]["shape"]
    owner = np.full(shape, -1, dtype=np.int64)
    for row in _records(log, region, STORE):
        owner[_box(row, len(shape))] = row[F["pid"]]
    return owner


# -- drawing ---------------------------------------------------------------------------------------
def _fold(values: np.ndarray) -> np.ndarray:
    """A 1-D array as a 2-D image, rows of a round width (NaN past the end)."""
    n = values.size
    width = min(n, 2 ** max(4, math.ceil(math.log2(math.sqrt(max(n, 1))))))
    rows = math.ceil(n / width)
    out = np.full(rows * width, np.nan)
    out[:n] = values
    return out.reshape(rows, width)


def _as_image(values: np.ndarray) -> np.ndarray:
    values = values.astype(float)
    if values.ndim == 1:
        return _fold(values)
    while values.ndim > 2:
        values = values[0]
    return values


def _program_label(log: AccessLog, launch: int, pid: int) -> str:
    if launch >= len(log.launches):
        return str(pid)
    gx, gy, gz = log.launches[launch]["grid"]
    if gy == gz == 1:
        return str(pid)
    return f"({pid % gx},{pid // gx % gy})" if gz == 1 else f"({pid % gx},{pid // gx % gy},{pid // (gx * gy)})"


def _programs_panel(ax: Any, log: AccessLog, title: str) -> None:
    from matplotlib.colors import BoundaryNorm, ListedColormap

    out = _output(log)
    if out < 0:
        ax.text(0.5, 0.5, "nothing stored", ha="center", va="center")
        ax.set_axis_off()
        return
    owner = program_map(log, out).astype(float)
    owner[owner < 0] = np.nan
    image = _as_image(owner)
    programs = int(np.nanmax(owner)) + 1 if np.isfinite(owner).any() else 1
    palette = [matplotlib_colour("tab20", i % 20) for i in range(programs)]
    cmap = ListedColormap(palette).with_extremes(bad="#f4f4f4")
    norm = BoundaryNorm(np.arange(-0.5, programs + 0.5), programs)
    ax.imshow(image, cmap=cmap, norm=norm, interpolation="nearest", aspect="auto")
    region = log.regions[out]
    stores = _records(log, out, STORE)
    every = max(1, math.ceil(len(stores) / 24))  # at most about 24 labels
    width = image.shape[1]
    for row in stores[::every]:
        label = _program_label(log, int(row[F["launch"]]), int(row[F["pid"]]))
        if len(region["shape"]) == 1:
            y, x = divmod((int(row[F["lo0"]]) + int(row[F["hi0"]])) // 2, width)
        else:
            y = (row[F["lo0"]] + row[F["hi0"]]) / 2
            x = (row[F["lo1"]] + row[F["hi1"]]) / 2
        ax.text(x, y, label, ha="center", va="center", fontsize=7,
                bbox={"facecolor": "white", "alpha": 0.7, "pad": 1, "linewidth": 0})  # fmt: skip
    unwritten = int(np.isnan(owner).sum())
    note = f"; {unwritten} never written (grey)" if unwritten else ""
    ax.set_title(f"{title}: the program that wrote each element of {region['name']} {tuple(region['shape'])}\n"
                 f"{plural(programs, 'program')}, labelled by program id{note}", fontsize=9)  # fmt: skip
    if len(region["shape"]) == 1:
        ax.set_xlabel(f"element % {image.shape[1]}")
        ax.set_ylabel(f"element // {image.shape[1]}")
    else:
        ax.set_xlabel("column")
        ax.set_ylabel("row")


def matplotlib_colour(name: str, index: int) -> tuple[float, ...]:
    import matplotlib

    return tuple(matplotlib.colormaps[name](index))


def _reads_panel(ax: Any, log: AccessLog, name: str, title: str) -> None:
    i = log.index(name)
    counts = loads_of(log, name).numpy().astype(float) if i >= 0 else np.zeros((1, 1))  # through its copies too
    image = _as_image(counts)
    top = max(1.0, float(np.nanmax(image)))
    shown = ax.imshow(image, cmap=_cmap("viridis"), vmin=0, vmax=top, interpolation="nearest", aspect="auto")
    ax.figure.colorbar(shown, ax=ax, fraction=0.04, label="times read")
    ax.set_title(f"{title}: times each element of {name} was read\n"
                 f"{float(counts.mean()):.2f} reads per element on average", fontsize=9)  # fmt: skip
    ax.set_xlabel("column")
    ax.set_ylabel("row")


def _matmul_panel(ax: Any, log: AccessLog, title: str, wave: int = WAVE) -> None:
    from matplotlib.patches import Rectangle

    out = _output(log)
    stores = _records(log, out, STORE)
    if not len(stores):
        ax.text(0.5, 0.5, "nothing stored", ha="center", va="center")
        ax.set_axis_off()
        return
    if len(log.regions[out]["shape"]) != 2:
        _programs_panel(ax, log, title)
        return
    launch = int(np.bincount(stores[:, F["launch"]]).argmax())
    stores = stores[stores[:, F["launch"]] == launch]
    m, n = log.regions[out]["shape"][:2]
    tm = int((stores[:, F["hi0"]] - stores[:, F["lo0"]]).max()) + 1
    tn = int((stores[:, F["hi1"]] - stores[:, F["lo1"]]).max()) + 1
    nm, nn = math.ceil(m / tm), math.ceil(n / tn)
    order = np.full((nm, nn), np.nan)
    for row in stores:
        order[int(row[F["lo0"]]) // tm, int(row[F["lo1"]]) // tn] = row[F["pid"]]
    wave = min(wave, log.programs(launch))
    shown = ax.imshow(order, cmap=_cmap("viridis"), interpolation="nearest", extent=(0, nn, nm, 0))
    ax.figure.colorbar(shown, ax=ax, fraction=0.04, label="program (launch order)")
    if nm * nn <= 256:
        for (r, c), pid in np.ndenumerate(order):
            if np.isfinite(pid):
                colour = "white" if pid < wave else "black"
                ax.text(c + 0.5, r + 0.5, str(int(pid)), ha="center", va="center", fontsize=7, color=colour)
    first = [(r, c) for (r, c), pid in np.ndenumerate(order) if np.isfinite(pid) and pid < wave]
    for r, c in first:
        ax.add_patch(Rectangle((c, r), 1, 1, fill=False, edgecolor="red", linewidth=1.5))
    rows_a = _first_wave_tiles(log, "a", launch, wave, 0, tm)
    cols_b = _first_wave_tiles(log, "b", launch, wave, 1, tn)
    bar = 0.04 * max(nm, nn, 3)  # the bars' thickness, in tiles
    for r in rows_a:  # a's row-tiles: a red bar left of the grid
        ax.add_patch(Rectangle((-1.5 * bar, r), bar, 1, color="red", clip_on=False))
    for c in cols_b:  # b's column-tiles: a red bar above the grid
        ax.add_patch(Rectangle((c, -1.5 * bar), 1, bar, color="red", clip_on=False))
    ax.set_xlim(-1.7 * bar, nn)
    ax.set_ylim(nm, -1.7 * bar)
    ax.set_xticks(range(nn + 1) if nn <= 16 else ax.get_xticks())
    ax.set_yticks(range(nm + 1) if nm <= 16 else ax.get_yticks())
    ax.set_title(f"{title}: tiles of c in launch order ({nm} x {nn} tiles of {tm} x {tn})\n"
                 f"first {wave} programs (red) load {len(rows_a)} tile(s) of a + {len(cols_b)} of b = "
                 f"{len(rows_a) + len(cols_b)}", fontsize=9)  # fmt: skip
    ax.set_xlabel("tile column (red bars: tiles of b the first wave loads)")
    ax.set_ylabel("tile row (red bars: tiles of a)")


def _first_wave_tiles(log: AccessLog, name: str, launch: int, wave: int, dim: int, tile: int) -> list[int]:
    i = log.index(name)
    if i < 0:
        return []
    rows = _records(log, i, LOAD)
    rows = rows[(rows[:, F["launch"]] == launch) & (rows[:, F["pid"]] < wave)]
    return sorted({int(lo) // tile for lo in rows[:, F[f"lo{dim}"]]})


def attention_visits(log: AccessLog) -> list[tuple[str, np.ndarray, list]]:
    """Per launch that pairs query and key tiles: (kernel, N x N order map of the first head, the tiles).

    A tile pair is ((first query row, end), (first key row, end), its step in its program).
    """
    names = {i: r["name"] for i, r in enumerate(log.regions)}
    shape = next((r["shape"] for r in log.regions if r["name"] == "q"), [0, 0, 0, 0])
    packed = len(shape) == 3  # (T, H, D): sequences packed along the tokens (14), the first head's group drawn
    dim = 0 if packed else 2
    n = shape[dim]
    rows = log.records.numpy()
    found = []
    for launch, info in enumerate(log.launches):
        mine = rows[rows[:, F["launch"]] == launch]
        if packed:
            mine = mine[mine[:, F["lo1"]] == 0]
        else:
            first_head = (mine[:, F["lo0"]] == 0) & (mine[:, F["lo1"]] == 0) & (mine[:, F["hi0"]] == 0)
            mine = mine[first_head & (mine[:, F["hi1"]] == 0)]
        image = np.full((n, n), np.nan)
        tiles: list = []
        owners = {"q": 0, "k": 0, None: 0}
        for pid in np.unique(mine[:, F["pid"]]):
            prog = mine[mine[:, F["pid"]] == pid]
            visits, owner = _program_visits(prog, names, image, dim)
            tiles += visits
            owners[owner] += 1
        if tiles:
            found.append((f"{info['kernel']}, {_SWEEPS[max(owners, key=lambda o: owners[o])]}", image, tiles))
    return found


_SWEEPS = {
    "q": "a program per query block (a row each)",
    "k": "a program per key block (a column each)",
    None: "each program walks every tile pair",
}


def _program_visits(
    prog: np.ndarray, names: dict[int, str], image: np.ndarray, dim: int = 2
) -> tuple[list, str | None]:
    """Fill the image with the order in which one program paired query and key tiles (rows along `dim`)."""

    def rows_of(row: np.ndarray) -> tuple[int, int]:
        return int(row[F[f"lo{dim}"]]), int(row[F[f"hi{dim}"]]) + 1

    # A program owns the rows of an output it stores exactly once (FlashAttention-2's o, dq, dk, dv);
    # one that stores an output over and over (FlashAttention-1's o in its inner loop) owns none.
    stores: dict[str, list[tuple[int, int]]] = {}
    for row in prog[prog[:, F["kind"]] == STORE]:
        stores.setdefault(names.get(int(row[F["region"]]), ""), []).append(rows_of(row))
    owned = {name: spans[0] for name, spans in stores.items() if len(spans) == 1}
    own_q = next((owned[n] for n in QUERY_OWNERS if n in owned), None)
    own_k = next((owned[n] for n in KEY_OWNERS if n in owned), None)
    loads = prog[prog[:, F["kind"]] == LOAD]
    sides = [names.get(int(r)) for r in loads[:, F["region"]]]
    # a pair is visited when the inner loop loads its next tile: the side the program does not own,
    # or (owning neither, as FlashAttention-1) the side it loads more often
    if own_q is not None or own_k is not None:
        inner = KEY_SIDE if own_q is not None else QUERY_SIDE
    else:
        inner = QUERY_SIDE if sum(s in QUERY_SIDE for s in sides) > sum(s in KEY_SIDE for s in sides) else KEY_SIDE
    cur_q = cur_k = None
    visits: list[tuple[tuple[int, int], tuple[int, int]]] = []
    for row, name in zip(loads, sides, strict=True):
        if name in QUERY_SIDE:
            cur_q = rows_of(row)
        elif name in KEY_SIDE:
            cur_k = rows_of(row)
        if name not in inner:
            continue
        pair = (own_q or cur_q, own_k or cur_k)
        if pair[0] is not None and pair[1] is not None and pair not in visits:
            visits.append(pair)
    for step, ((q0, q1), (k0, k1)) in enumerate(visits):
        patch = image[q0:q1, k0:k1]
        patch[np.isnan(patch)] = step / max(1, len(visits) - 1)
    owner = "k" if own_k is not None else "q" if own_q is not None else None
    return [(q, k, step) for step, (q, k) in enumerate(visits)], owner


def _attention_panel(ax: Any, kernel: str, image: np.ndarray, tiles: list, causal: bool, title: str) -> None:
    from matplotlib.collections import PatchCollection
    from matplotlib.patches import Rectangle

    n = image.shape[0]
    shown = ax.imshow(image, cmap=_cmap("viridis"), vmin=0, vmax=1, interpolation="nearest", extent=(0, n, n, 0))
    edges = [Rectangle((k0, q0), k1 - k0, q1 - q0) for (q0, q1), (k0, k1), _ in tiles[:4000]]
    ax.add_collection(PatchCollection(edges, facecolor="none", edgecolor="white", linewidth=0.4))
    if len(tiles) <= 100:  # each tile pair numbered in its program's order
        for (q0, q1), (k0, k1), step in tiles:
            ax.text((k0 + k1) / 2, (q0 + q1) / 2, str(step), ha="center", va="center", fontsize=6, color="white")
    bar = ax.figure.colorbar(shown, ax=ax, fraction=0.04, ticks=[0, 1])
    bar.ax.set_yticklabels(["first", "last"])
    bar.set_label("when, within its program")
    if causal:
        ax.plot([0, n], [0, n], color="red", linewidth=1)
        ax.text(n * 0.97, n * 0.05, "masked", color="red", ha="right", va="top", fontsize=8)
    ax.set_title(f"{title}: {kernel}\n{len(tiles)} (query, key) tile pairs loaded, first head", fontsize=9)
    ax.set_xlabel("key row")
    ax.set_ylabel("query row")


def _decoding_panels(top: Any, bottom: Any, log: AccessLog, inputs: dict[str, Any], title: str) -> None:
    """Decoding (11-13), per (batch, kv head): the program that loaded each key (a split shows as bands) above,
    the times each key was loaded below."""
    from matplotlib.colors import BoundaryNorm, ListedColormap

    from checks.engine.judging.rules.decoding import reader_image

    image, reads, labels, ends = reader_image(inputs, log)
    programs = sorted({int(p) for p in image.flat if p >= 0})
    coloured = np.full(image.shape, np.nan)
    for i, pid in enumerate(programs):
        coloured[image == pid] = i
    count = max(1, len(programs))
    palette = [matplotlib_colour("tab20", i % 20) for i in range(count)]
    norm = BoundaryNorm(np.arange(-0.5, count + 0.5), count)
    top.imshow(coloured, cmap=ListedColormap(palette).with_extremes(bad="#f4f4f4"), norm=norm,
               interpolation="nearest", aspect="auto")  # fmt: skip
    top.set_title(f"{title}: the program that last loaded each key of K (grey: none)\n"
                  f"{plural(len(programs), 'program')} shown", fontsize=9)  # fmt: skip
    shown = bottom.imshow(reads, cmap=_cmap("viridis"), vmin=0, vmax=max(1.0, float(reads.max())),
                          interpolation="nearest", aspect="auto")  # fmt: skip
    bottom.figure.colorbar(shown, ax=bottom, fraction=0.04, label="times loaded")
    loaded = reads[reads > 0]
    average = float(loaded.mean()) if loaded.size else 0.0
    bottom.set_title(f"{title}: times each key of K was loaded\n{average:.2f} on average over the keys loaded",
                     fontsize=9)  # fmt: skip
    for ax in (top, bottom):
        ax.set_yticks(range(len(labels)), labels, fontsize=7)
        ax.set_xlabel("key index j (red: the end of each head's keys)")
        for row, end in enumerate(ends):
            ax.plot([end - 0.5, end - 0.5], [row - 0.5, row + 0.5], color="red", linewidth=1.2)


def _case_inputs(number: int | str, case: dict[str, Any], seed: int = 1) -> dict[str, Any]:
    """A recording's inputs, drawn again as the recorder drew them (the map needs a paged cache's block_table);
    `case` is the case as the recording keeps it (`Case.given`)."""
    from checks.engine.inputs import draw_case

    puzzle = get_puzzle(number)
    index = next((i for i, c in enumerate(puzzle.cases.cpu) if c.given() == case), 0)
    return draw_case(puzzle, index, seed)[1]


def _cmap(name: str) -> Any:
    import matplotlib

    return matplotlib.colormaps[name].with_extremes(bad="#f4f4f4")


def _safely(ax: Any, panel: Any, *args: Any) -> None:
    """Draw one panel; a log the panel cannot read (an odd submission) gives a note, not a crash."""
    try:
        panel(ax, *args)
    except Exception as exc:  # noqa: BLE001 - the picture is a help, never a reason to fail
        ax.clear()
        ax.set_axis_off()
        ax.text(0.5, 0.5, f"cannot draw this panel:\n{type(exc).__name__}: {exc}", ha="center", va="center",
                fontsize=8, wrap=True)  # fmt: skip


def share_colour_scales(axes: Any) -> None:
    """Give the panels of each row (yours, the answer key's) one colour scale, so equal colours mean equal values.

    Only images on a plain linear scale are joined (times read, launch order); colours that stand for
    categories (which program wrote an element) are already the same for the same program.
    """
    from matplotlib.colors import Normalize

    for row in axes:
        images = [image for ax in row for image in ax.get_images() if type(image.norm) is Normalize]
        limits = [image.get_clim() for image in images if None not in image.get_clim()]
        if len(images) < 2 or not limits:
            continue
        low, high = min(lo for lo, _ in limits), max(hi for _, hi in limits)
        for image in images:
            image.set_clim(low, high)


def draw(number: int | str, mine: dict[str, Any], key: dict[str, Any] | None, png: Path) -> Path:
    """Draw a recording (and the answer key's, beside it) into png; returns the path."""
    import matplotlib.pyplot as plt

    fig = figure(number, mine, key)
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=110)
    plt.close(fig)
    return png


def figure(number: int | str, mine: dict[str, Any], key: dict[str, Any] | None) -> Any:
    """The access map's figure: a recording's panels, and the answer key's beside them on the same colour scales."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sides = [("yours", AccessLog.from_dict(mine["log"]))]
    if key is not None:
        sides.append(("answer key", AccessLog.from_dict(key["log"])))
    kind = get_puzzle(number).map_kind
    causal = bool(mine.get("scalars", {}).get("causal", False))
    if kind == ATTENTION:
        panels = [attention_visits(log) for _, log in sides]
        rows = max(1, max(len(p) for p in panels))
        fig, axes = plt.subplots(rows, len(sides), figsize=(5.8 * len(sides), 5.0 * rows), squeeze=False)
        for col, ((title, _), found) in enumerate(zip(sides, panels, strict=True)):
            for row in range(rows):
                if row < len(found):
                    _safely(axes[row][col], _attention_panel, *found[row], causal, title)
                else:
                    axes[row][col].set_axis_off()
    elif kind == DECODING:
        inputs = _case_inputs(number, mine.get("case", {}), mine.get("seed", 1))
        fig, axes = plt.subplots(2, len(sides), figsize=(6.2 * len(sides), 7.6), squeeze=False)
        for col, (title, log) in enumerate(sides):
            _safely(axes[0][col], _decoding_panels, axes[1][col], log, inputs, title)
    else:
        per_side = 2 if kind == SOFTMAX else 1
        fig, axes = plt.subplots(per_side, len(sides), figsize=(6.2 * len(sides), 4.6 * per_side), squeeze=False)
        for col, (title, log) in enumerate(sides):
            _safely(axes[0][col], _matmul_panel if kind == MATMUL else _programs_panel, log, title)
            if kind == SOFTMAX:
                _safely(axes[1][col], _reads_panel, log, _first_input(log), title)
    case = ", ".join(f"{k}={v}" for k, v in mine.get("case", {}).items() if k != "note")
    share_colour_scales(axes)
    fig.suptitle(f"Puzzle {number}: where the kernels read and write\n({case})", fontsize=10)
    fig.tight_layout()
    return fig


# -- commands --------------------------------------------------------------------------------------
def make_map(
    puzzle: Puzzle,
    file: Path | None = None,
    *,
    solution: bool = False,
    case: int = 0,
    out: Path | None = None,
    source: tuple[str, str] | None = None,
    earlier: Path | None = None,
    seed: int = 1,
) -> tuple[Path, list[str]]:
    """Record the submission and the answer key on CPU case index `case` drawn with `seed`, draw the map; (png,
    traffic lines).

    `earlier` is the learner's code of the step the puzzle builds on (9a for 9), as `--earlier` gives it to a check."""
    from checks.engine.access.traffic import traffic_lines
    from checks.engine.grade import prepare

    with tempfile.TemporaryDirectory(prefix="checks-map-") as tmp:
        submission, _, earlier = prepare(puzzle, file, solution, Path(tmp), source, earlier)
        mine = record_in_own_process(puzzle.number, submission, case, puzzle.timeout, earlier, seed)
    key = mine if solution else record_in_own_process(puzzle.number, puzzle.solution, case, puzzle.timeout, seed=seed)
    png = out or ROOT / "build" / "maps" / f"{puzzle.stem}.png"
    draw(puzzle.number, mine, None if solution else key, png)
    return png, traffic_lines(mine["log"], None if solution else key["log"])


def no_map(puzzle: Puzzle) -> str:
    """Why a Hopper step (Gluon) has no access map."""
    return (
        f"Puzzle {puzzle.number} has no access map: it is written in Gluon, which Triton's interpreter (where the map "
        f"is recorded) cannot run; `make check PUZZLE={puzzle.number}` grades it on a Hopper GPU (an H100 or H200)."
    )


def main(argv: list[str] | None = None) -> int:
    """Draw the map; under `make map`, a failure ends with what make's own last line means (`make_note`)."""
    code = _main(argv)
    note = make_note(code, target="map")
    if note:
        sys.stdout.flush()
        print(note, file=sys.stderr)
    return code


def _main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="python -m checks.learner.maps", description=__doc__.split("\n\n")[0])
    parser.add_argument("puzzle", help="the puzzle (1-13, 10a, 10b)")
    parser.add_argument("--file", type=Path, help="your .py file or notebook (default: the puzzle's notebook)")
    parser.add_argument("--solution", action="store_true", help="map the answer key alone")
    parser.add_argument(
        "--earlier", type=Path, help="your code of the step this puzzle builds on (9a for 9), as make check takes it"
    )
    parser.add_argument(
        "--case", type=int, default=1, help="which case, numbered as a check's report numbers them (default: case 1)"
    )
    parser.add_argument("--seed", type=int, default=1, help="draw the case as a check with this seed does (default 1)")
    parser.add_argument("--out", type=Path, help="where to write the PNG (default: build/maps/NN_slug.png)")
    args = parser.parse_args(argv)
    try:
        puzzle = get_puzzle(args.puzzle)
        if puzzle.needs_hopper:
            raise MapError(no_map(puzzle))
        if not 1 <= args.case <= (count := len(puzzle.cases.cpu)):
            raise MapError(f"Puzzle {puzzle.number} has {count} cases in the interpreter: pick 1 to {count}.")
        png, lines = make_map(
            puzzle,
            args.file,
            solution=args.solution,
            case=args.case - 1,
            out=args.out,
            earlier=args.earlier,
            seed=args.seed,
        )
    except (UnknownPuzzle, MapError) as exc:
        print(exc, file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - a missing file and the like: say it, no traceback
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    print(f"Access map saved to {shown(png)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
