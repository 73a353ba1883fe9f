"""Puzzle 4's method rule: tiles of c launched in grouped order, so that the first wave shares tiles of a and b.

Judged from the interpreter's access log: which tiles of c each program stored, in the order a GPU
would compute them, and which tiles of a and b it loaded for each.
"""

from __future__ import annotations

import math

import numpy as np

from checks.engine.access.log import LOAD, STORE, AccessLog, F
from checks.engine.access.queries import highs, log_of, lows, rows_of
from checks.engine.judging.rules.declare import ACCESS_LOG, ON_REQUEST, rule
from checks.engine.judging.rules.pictures import ACCESS_MAP
from checks.engine.judging.rules.problem import CaseContext, Problem, say
from checks.verdict import plural

_ROW, _COL = 0, 1  # dimensions of a matrix


def grouped_working_set(num_pid_m: int, num_pid_n: int, group: int, wave: int) -> int:
    """Distinct a row-tiles plus b column-tiles of the first `wave` programs in grouped order."""
    rows, cols = set(), set()
    for pid in range(min(wave, num_pid_m * num_pid_n)):
        in_group = group * num_pid_n
        first_m = (pid // in_group) * group
        size_m = min(num_pid_m - first_m, group)
        rows.add(first_m + (pid % in_group) % size_m)
        cols.add((pid % in_group) // size_m)
    return len(rows) + len(cols)


def best_working_set(num_pid_m: int, num_pid_n: int, wave: int) -> int:
    """The smallest working set any group height gives (group 1 is row-major order)."""
    return min(grouped_working_set(num_pid_m, num_pid_n, g, wave) for g in range(1, num_pid_m + 1))


@rule(
    ON_REQUEST,
    checks="the first wave of matmul programs shares tiles like a grouped launch order",
    message=(
        "Launch the tiles of c in grouped order: map pid to (pid_m, pid_n) so that consecutive programs walk down "
        "a group of GROUP_SIZE_M tile-rows before moving one tile to the right, and share tiles of a and b."
    ),
    needs=(ACCESS_LOG,),
    picture=ACCESS_MAP,
)
def grouped_order(
    ctx: CaseContext,
    first_wave: int = 16,
    factor: float = 1.5,
    a: str = "a",
    b: str = "b",
    c: str = "c",
    message: str | None = None,
) -> Problem | None:
    """The first wave of tiles must share few tiles of a and b (a grouped launch order).

    The wave is the first `first_wave` tiles of c in the order a GPU computes them: every program's
    first tile, in launch order, then every program's second, and so on (a persistent kernel's
    programs walk several tiles each). A program's loads of a and b belong to the tile it stores next.
    Judged only where the case can tell: when row-major or column-major order's working set exceeds
    `factor` x the best grouped order's for the learner's own tile grid (a wide grid tells row-major
    order from grouped, a tall one column-major).
    """
    log = log_of(ctx)
    if log is None:
        return None
    stores = rows_of(log, c, (STORE,))
    if not len(stores):
        return None
    launch = int(np.bincount(stores[:, F["launch"]]).argmax())  # the launch that wrote most of c
    tile_m, tile_n, num_pid_m, num_pid_n = _tile_grid(log, stores[stores[:, F["launch"]] == launch], c)
    tiles = _tiles_in_time_order(log, launch, a, b, c)
    wave = min(first_wave, len(tiles))
    best = best_working_set(num_pid_m, num_pid_n, wave)
    row_major = grouped_working_set(num_pid_m, num_pid_n, 1, wave)
    column_major = grouped_working_set(num_pid_m, num_pid_n, num_pid_m, wave)  # one group as tall as c
    if max(row_major, column_major) <= factor * best:
        return None  # this tile grid is too small to tell the orders apart
    loads = np.concatenate([tile[2] for tile in tiles[:wave]])
    first_a = loads[loads[:, F["region"]] == log.index(a)]
    first_b = loads[loads[:, F["region"]] == log.index(b)]
    tiles_a, tiles_b = _distinct(first_a, _ROW), _distinct(first_b, _COL)
    if tiles_a + tiles_b <= factor * best:
        return None
    persistent = any(step for step, *_ in tiles[:wave])
    who = f"{wave} tiles (each program's first, then each one's next)" if persistent else f"{wave} programs"
    measured = (
        f"Your first {who} load {plural(tiles_a, 'row-tile')} of a and {plural(tiles_b, 'column-tile')} of b "
        f"({tiles_a + tiles_b} tiles) on a {num_pid_m} x {num_pid_n} grid of {tile_m} x {tile_n} tiles; "
        f"a grouped order needs {best} (row-major order: {row_major}, column-major order: {column_major})."
    )
    details = [
        f"program {pid}{f' (its tile {step + 1})' if step else ''}: tile row {int(store[F['lo0']]) // tile_m}, "
        f"column {int(store[F['lo1']]) // tile_n}"
        for step, pid, _, store in tiles[: min(wave, 8)]
    ]
    return Problem(say(message, grouped_order.message, measured), details=details)


def _tile_grid(log: AccessLog, stores: np.ndarray, c: str) -> tuple[int, int, int, int]:
    """(tile_m, tile_n, num_pid_m, num_pid_n): the learner's own tiles of c, from the stores of one launch."""
    m, n = log.regions[log.index(c)]["shape"][:2]
    tile_m = int((highs(stores, _ROW) - lows(stores, _ROW)).max()) + 1
    tile_n = int((highs(stores, _COL) - lows(stores, _COL)).max()) + 1
    return tile_m, tile_n, math.ceil(m / tile_m), math.ceil(n / tile_n)


def _distinct(loads: np.ndarray, dim: int) -> int:
    """How many different tiles (ranges along dim) these loads touched."""
    return len({(int(lo), int(hi)) for lo, hi in zip(lows(loads, dim), highs(loads, dim), strict=True)})


def _tiles_in_time_order(
    log: AccessLog, launch: int, a: str, b: str, c: str
) -> list[tuple[int, int, np.ndarray, np.ndarray]]:
    """(step, pid, loads of a and b, first store) of each tile of c the launch computed, sorted by (step, pid).

    The interpreter runs each program to its end, so a program's records are in its own order: its
    loads up to a store of c make one tile, and stores with no load between them (one tile stored in
    parts) belong to the same tile.
    """
    ia, ib, ic = log.index(a), log.index(b), log.index(c)
    rows = log.records.numpy()
    rows = rows[rows[:, F["launch"]] == launch]
    kind, region = rows[:, F["kind"]], rows[:, F["region"]]
    is_store = (kind == STORE) & (region == ic)
    keep = is_store | ((kind == LOAD) & np.isin(region, [ia, ib]))
    rows, is_store = rows[keep], is_store[keep]
    tiles: list[tuple[int, int, np.ndarray, np.ndarray]] = []
    pending: dict[int, list[int]] = {}  # pid -> its loads since its last store
    steps: dict[int, int] = {}  # pid -> tiles it has stored
    open_: dict[int, bool] = {}  # pid -> loads since its last store (a new tile begins)
    for k in range(len(rows)):
        pid = int(rows[k, F["pid"]])
        if not is_store[k]:
            pending.setdefault(pid, []).append(k)
            open_[pid] = True
        elif open_.get(pid, True):
            tiles.append((steps.get(pid, 0), pid, rows[pending.pop(pid, [])], rows[k]))
            steps[pid] = steps.get(pid, 0) + 1
            open_[pid] = False
    tiles.sort(key=lambda tile: (tile[0], tile[1]))
    return tiles
