"""Method rules: how a kernel computed its answer, judged from the interpreter's access log.

Each rule is a pure function `rule(ctx: CaseContext, **params) -> Problem | None` (see
`checks.engine.rules`). It reads `ctx.obs.access` (an `AccessLog.to_dict()`, None on a GPU: then
every rule here says nothing), `ctx.inputs` and `ctx.case`, and its parameters come from the
puzzle's `rules:` entry in `puzzles.yaml`. A `message` parameter, when given, replaces the first
sentence of the rule's own message; the measured numbers follow it.

A "tile" is what one tl.load touched: the box of indices of one record of the log.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from checks.engine.access import ATOMIC, LOAD, STORE, AccessLog, F
from checks.engine.rules import CaseContext, Problem

_ROW, _COL = 0, 1  # dimensions of a matrix
_SEQ = 2  # the sequence dimension of a (B, H, N, D) tensor


def _log(ctx: CaseContext) -> AccessLog | None:
    data = getattr(ctx.obs, "access", None)
    return AccessLog.from_dict(data) if data else None


def _rows(log: AccessLog, name: str, kinds: tuple[int, ...]) -> np.ndarray:
    """The records of one named region with these kinds, as a numpy array (empty when none)."""
    i = log.index(name)
    if i < 0 or log.records.numel() == 0:
        return np.zeros((0, len(log.fields)), dtype=np.int64)
    rows = log.records.numpy()
    keep = (rows[:, F["region"]] == i) & np.isin(rows[:, F["kind"]], kinds)
    return rows[keep]


def _lo(rows: np.ndarray, dim: int) -> np.ndarray:
    return rows[:, F[f"lo{dim}"]]


def _hi(rows: np.ndarray, dim: int) -> np.ndarray:
    return rows[:, F[f"hi{dim}"]]


def _say(message: str | None, default: str, measured: str) -> str:
    return f"{message or default} {measured}".strip()


# -- puzzle 4: grouped launch order ----------------------------------------------------------------
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


def grouped_order(
    ctx: CaseContext,
    first_wave: int = 16,
    factor: float = 1.5,
    a: str = "a",
    b: str = "b",
    c: str = "c",
    message: str | None = None,
) -> Problem | None:
    """The first wave of programs must share few tiles of a and b (a grouped launch order).

    Judged only where the case can tell: when row-major order's working set exceeds `factor` x the
    best grouped order's for the learner's own tile grid.
    """
    log = _log(ctx)
    if log is None:
        return None
    stores = _rows(log, c, (STORE,))
    if not len(stores):
        return None
    launch = int(np.bincount(stores[:, F["launch"]]).argmax())  # the launch that wrote most of c
    stores = stores[stores[:, F["launch"]] == launch]
    m, n = log.regions[log.index(c)]["shape"][:2]
    tile_m = int((_hi(stores, _ROW) - _lo(stores, _ROW)).max()) + 1
    tile_n = int((_hi(stores, _COL) - _lo(stores, _COL)).max()) + 1
    num_pid_m, num_pid_n = math.ceil(m / tile_m), math.ceil(n / tile_n)
    wave = min(first_wave, log.programs(launch))
    best = best_working_set(num_pid_m, num_pid_n, wave)
    row_major = grouped_working_set(num_pid_m, num_pid_n, 1, wave)
    if row_major <= factor * best:
        return None  # this tile grid is too small to tell the orders apart
    loads_a = _rows(log, a, (LOAD,))
    loads_b = _rows(log, b, (LOAD,))
    first_a = loads_a[(loads_a[:, F["launch"]] == launch) & (loads_a[:, F["pid"]] < wave)]
    first_b = loads_b[(loads_b[:, F["launch"]] == launch) & (loads_b[:, F["pid"]] < wave)]
    tiles_a = len({(int(lo), int(hi)) for lo, hi in zip(_lo(first_a, _ROW), _hi(first_a, _ROW), strict=True)})
    tiles_b = len({(int(lo), int(hi)) for lo, hi in zip(_lo(first_b, _COL), _hi(first_b, _COL), strict=True)})
    if tiles_a + tiles_b <= factor * best:
        return None
    default = (
        "Launch the tiles of c in grouped order: map pid to (pid_m, pid_n) so that consecutive programs "
        "walk down a group of GROUP_SIZE_M tile-rows before moving one tile to the right, and share tiles of a and b."
    )
    measured = (
        f"Your first {wave} programs load {_n(tiles_a, 'row-tile')} of a and {_n(tiles_b, 'column-tile')} of b "
        f"({tiles_a + tiles_b} tiles) on a {num_pid_m} x {num_pid_n} grid of {tile_m} x {tile_n} tiles; "
        f"a grouped order needs {best} (row-major order: {row_major})."
    )
    return Problem(
        "grouped_order", _say(message, default, measured),
        details=[f"program {p}: tile row {r}, column {j}" for p, r, j in _first_tiles(stores, wave, tile_m, tile_n)],
        picture={"kind": "matmul_order", "launch": launch, "wave": wave},
    )  # fmt: skip


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _first_tiles(stores: np.ndarray, wave: int, tile_m: int, tile_n: int) -> list[tuple[int, int, int]]:
    seen: dict[int, tuple[int, int]] = {}
    for row in stores[np.argsort(stores[:, F["pid"]], kind="stable")]:
        pid = int(row[F["pid"]])
        if pid < min(wave, 8) and pid not in seen:
            seen[pid] = (int(row[F["lo0"]]) // tile_m, int(row[F["lo1"]]) // tile_n)
    return [(p, r, c) for p, (r, c) in sorted(seen.items())]


# -- puzzles 9, 10: causal block skipping ----------------------------------------------------------
def _owners(log: AccessLog, names: tuple[str, ...]) -> dict[tuple[int, int], tuple[int, int]]:
    """(launch, pid) -> (first, last) sequence row the program stored in any of these outputs."""
    owned: dict[tuple[int, int], tuple[int, int]] = {}
    for name in names:
        for row in _rows(log, name, (STORE,)):
            key = (int(row[F["launch"]]), int(row[F["pid"]]))
            lo, hi = int(row[F[f"lo{_SEQ}"]]), int(row[F[f"hi{_SEQ}"]])
            old = owned.get(key)
            owned[key] = (lo, hi) if old is None else (min(old[0], lo), max(old[1], hi))
    return owned


def causal_skipping(
    ctx: CaseContext,
    queries: tuple[str, ...] = ("o", "dq"),
    keys: tuple[str, ...] = ("dk", "dv"),
    key_inputs: tuple[str, ...] = ("k", "v"),
    query_inputs: tuple[str, ...] = ("q", "do"),
    message: str | None = None,
) -> Problem | None:
    """With causal=True no program loads a tile that lies entirely on the masked side of the diagonal.

    A program that stores rows of `queries` (o, dq) owns those query rows: a K or V tile whose
    first key comes after its last query row is wasted. A program that stores rows of `keys`
    (dk, dv) owns those key rows: a Q or dO tile whose last query comes before its first key is.
    """
    if not bool(ctx.inputs.get("causal", ctx.case.get("causal", False))):
        return None
    log = _log(ctx)
    if log is None:
        return None
    key_owners = _owners(log, tuple(keys))
    query_owners = {k: v for k, v in _owners(log, tuple(queries)).items() if k not in key_owners}
    wasted: list[str] = []
    shown: dict[int, int] = {}  # launch -> examples listed
    count = 0
    for inputs, owners, side in ((key_inputs, query_owners, "after"), (query_inputs, key_owners, "before")):
        for name in inputs:
            for row in _rows(log, name, (LOAD, ATOMIC)):
                key = (int(row[F["launch"]]), int(row[F["pid"]]))
                if key not in owners:
                    continue
                first, last = owners[key]
                lo, hi = int(row[F[f"lo{_SEQ}"]]), int(row[F[f"hi{_SEQ}"]])
                if (side == "after" and lo > last) or (side == "before" and hi < first):
                    count += 1
                    shown[key[0]] = shown.get(key[0], 0) + 1
                    if shown[key[0]] <= 3:
                        own = "query" if side == "after" else "key"
                        wasted.append(
                            f"{_program(log, *key)} (owns {own} rows {first}-{last}) loaded {name} rows {lo}-{hi}"
                        )
    if not count:
        return None
    default = (
        "Skip the blocks that causal attention masks entirely: a program that owns a block of queries stops "
        "after the key block on its diagonal, and a program that owns a block of keys starts at the query "
        "block on its diagonal."
    )
    measured = f"Your kernels loaded {count} tiles that lie entirely on the masked side of the diagonal."
    return Problem("causal_skipping", _say(message, default, measured), details=wasted,
                   picture={"kind": "attention_tiles"})  # fmt: skip


def _program(log: AccessLog, launch: int, pid: int) -> str:
    """'kernel, program (x, y)' for a record's launch and launch-order pid."""
    if launch >= len(log.launches):
        return f"program {pid}"
    gx, gy, gz = log.launches[launch]["grid"]
    x, y, z = pid % gx, (pid // gx) % gy, pid // (gx * gy)
    ids = (x,) if gy == gz == 1 else (x, y) if gz == 1 else (x, y, z)
    return f"{log.launches[launch]['kernel']}, program {ids if len(ids) > 1 else ids[0]}"


# -- puzzle 9: parallel over query blocks ----------------------------------------------------------
def parallel_over_queries(
    ctx: CaseContext, output: str = "o", min_n: int = 64, message: str | None = None
) -> Problem | None:
    """Once N spans several blocks, the kernel that writes o runs more programs than B * H."""
    q = ctx.inputs.get("q")
    log = _log(ctx)
    if log is None or q is None:
        return None
    b, h, n = int(q.shape[0]), int(q.shape[1]), int(q.shape[2])
    if n < min_n:
        return None
    stores = _rows(log, output, (STORE,))
    if not len(stores):
        return None
    launches = sorted({int(x) for x in stores[:, F["launch"]]})
    programs = max(log.programs(launch) for launch in launches)
    if programs > b * h:
        return None
    default = (
        "Split the queries into blocks as well as the heads: launch a grid of (cdiv(N, BLOCK_M), B * H) "
        "so that each program keeps one block of Q on chip."
    )
    measured = f"Your kernel that writes {output} ran {programs} programs for B * H = {b * h} heads and N = {n}."
    return Problem("parallel_over_queries", _say(message, default, measured), picture={"kind": "attention_tiles"})


# -- puzzle 10: never store P ---------------------------------------------------------------------
def p_never_stored(ctx: CaseContext, factor: float = 3.0, message: str | None = None) -> Problem | None:
    """The submission's own buffers, and what it stores, stay within `factor` x its inputs' total size."""
    log = _log(ctx)
    if log is None:
        return None
    input_bytes = sum(int(t.numel()) * int(t.element_size()) for t in ctx.inputs.values() if hasattr(t, "element_size"))
    own = [i for i, r in enumerate(log.regions) if r["role"] != "input"]
    allocated = sum(log.regions[i]["size"] * log.regions[i]["element_size"] for i in own)
    stored = sum(log.stored[i] * log.regions[i]["element_size"] for i in own)
    if max(allocated, stored) <= factor * input_bytes:
        return None
    biggest = max(own, key=lambda i: log.regions[i]["size"] * log.regions[i]["element_size"])
    big = log.regions[biggest]
    default = (
        "Never store the N x N probabilities: recompute each tile of P from q, k and lse inside the loop "
        "(P = exp2(q k^T * qk_scale - lse2)) and use it at once."
    )
    measured = (
        f"Your code allocated {_mb(allocated)} and stored {_mb(stored)} for {_mb(input_bytes)} of inputs "
        f"(at most {factor:g}x is allowed); the largest buffer is {_region_name(big)}."
    )
    details = [
        f"{_region_name(log.regions[i])}: {_mb(log.regions[i]['size'] * log.regions[i]['element_size'])}"
        for i in sorted(own, key=lambda i: -log.regions[i]["size"] * log.regions[i]["element_size"])[:4]
    ]
    return Problem("p_never_stored", _say(message, default, measured), details=details,
                   picture={"kind": "traffic"})  # fmt: skip


def _region_name(region: dict[str, Any]) -> str:
    name, label = region["name"], region["label"]
    return label if name == label else f"{name} ({label})"


def _mb(n: float) -> str:
    return f"{n / 1e6:.2f} MB" if n >= 1e5 else f"{n / 1e3:.1f} kB"
