"""Method rules of the attention puzzles: how a kernel computed its answer, judged from the interpreter's access log.

Puzzle 4's grouped launch order is in `checks.engine.judging.rules.launch_order`, with the same interface.

Each rule is a pure function `rule(ctx: CaseContext, **params) -> Problem | None` (see
`checks.engine.judging.rules.problem`), declared beside it (`checks.engine.judging.rules.declare`). It reads
`ctx.obs.access`
(an `AccessLog.to_dict()`, None on a GPU: then the rulebook does not apply it), `ctx.inputs` and `ctx.case`,
and its parameters come from the puzzle's `rules:` entry in `puzzles.yaml`. A `message` parameter, when given,
replaces the rule's declared message; the measured numbers follow it.

The rules count elements, not boxes: which rows each program loaded (`seen_by`, through copies of the inputs) and
which rows of an output it computed (`computed_by`, through scratch and copies): `checks.engine.access.queries`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from checks.engine.access.log import ATOMIC, LOAD, STORE, F
from checks.engine.access.queries import (
    computed_by,
    highs,
    log_of,
    lows,
    program_name,
    reached,
    rows_of,
    seen_by,
)
from checks.engine.judging.rules.declare import ACCESS_LOG, ON_REQUEST, rule
from checks.engine.judging.rules.pictures import ACCESS_MAP
from checks.engine.judging.rules.problem import CaseContext, Problem, say
from checks.verdict import plural

_SEQ = 2  # the sequence dimension of a (B, H, N, D) tensor


# -- puzzles 9, 10: causal block skipping ----------------------------------------------------------
@rule(
    ON_REQUEST,
    checks="with causal=True, no tile entirely on the masked side of the diagonal is loaded",
    message=(
        "Skip the blocks that causal attention masks entirely: a program that owns a block of queries stops "
        "after the key block on its diagonal, and a program that owns a block of keys starts at the query "
        "block on its diagonal."
    ),
    needs=(ACCESS_LOG,),
    picture=ACCESS_MAP,
)
def causal_skipping(
    ctx: CaseContext,
    queries: tuple[str, ...] = ("o", "dq"),
    keys: tuple[str, ...] = ("dk", "dv"),
    key_inputs: tuple[str, ...] = ("k", "v"),
    query_inputs: tuple[str, ...] = ("q", "do"),
    message: str | None = None,
) -> Problem | None:
    """With causal=True no program loads keys that lie past the diagonal tile of the query rows it owns.

    Counted element by element, through every copy of the inputs (`loads_of`'s account): a program owns the rows
    of `queries` (o, dq) whose values it computed (`computed_by`: through scratch and copies too); each row of K or V
    it loaded (`seen_by`) after its last query row, and past the tile that holds that row (tiles of its key tile's
    height from row 0; that height is the most rows one of its loads of that input held, lanes over columns), is
    wasted. The diagonal tile, partly masked, is
    work. A program that owns rows of `keys` (dk, dv) owns those key rows: each row of Q or dO it loaded before its
    first key row, and before the tile that holds it, is wasted.
    """
    if not bool(ctx.inputs.get("causal", bool(ctx.case.causal))):
        return None
    log = log_of(ctx)
    if log is None:
        return None
    key_owners = owned_rows(log, tuple(keys), _SEQ)
    query_owners = {k: v for k, v in owned_rows(log, tuple(queries), _SEQ).items() if k not in key_owners}
    wasted: list[str] = []
    shown: dict[int, int] = {}  # launch -> examples listed
    count = 0
    for inputs, owners, side in ((key_inputs, query_owners, "after"), (query_inputs, key_owners, "before")):
        for name in inputs:
            tiles = _tile_rows(log, name)
            for who, loaded in seen_by(log, name, LOAD, _SEQ).items():
                if who not in owners or not len(owners[who]):
                    continue
                first, last = int(owners[who].min()), int(owners[who].max())
                tile = tiles.get(who, 1)  # the diagonal tile: the one of the program's tiles that holds its last row
                past = (
                    loaded[loaded >= (last // tile + 1) * tile]
                    if side == "after"
                    else loaded[loaded < (first // tile) * tile]
                )
                if not past.size:
                    continue
                count += int(past.size)
                shown[who[0]] = shown.get(who[0], 0) + 1
                if shown[who[0]] <= 3:
                    own = "query" if side == "after" else "key"
                    wasted.append(
                        f"{program_name(log, *who)} (owns {own} rows {first}-{last}) loaded {name} rows {_rows(past)}"
                    )
    if not count:
        return None
    measured = (
        f"Your kernels loaded {plural(count, 'row')} of keys or queries that lie entirely on the masked side of the "
        "diagonal, past the tile on it."
    )
    return Problem(say(message, causal_skipping.message, measured), details=wasted)


def owned_rows(log: Any, names: tuple[str, ...], dim: int) -> dict[tuple[int, int], np.ndarray]:
    """(launch, pid) -> the indices along `dim` of the outputs `names` whose values the program computed (through
    scratch and copies, `computed_by`); where the log does not follow an output, the indices it stored there."""
    owned: dict[tuple[int, int], np.ndarray] = {}
    for name in names:
        if log.index(name) < 0:
            continue
        computed = computed_by(log, name)
        if computed:
            found = {who: np.nonzero(mask.any(axis=tuple(a for a in range(mask.ndim) if a != dim)))[0]
                     for who, mask in computed.items()}  # fmt: skip
        else:
            found = seen_by(log, name, STORE, dim)
        for who, rows in found.items():
            owned[who] = np.union1d(owned[who], rows) if who in owned else rows
    return owned


def _tile_rows(log: Any, name: str) -> dict[tuple[int, int], int]:
    """(launch, pid) -> the most rows along the sequence one of its loads of `name` held: its lanes over the columns
    its box spans (a lane gathered far away widens the box, not this)."""
    tiles: dict[tuple[int, int], int] = {}
    for row in rows_of(log, name, (LOAD, ATOMIC)):
        who = (int(row[F["launch"]]), int(row[F["pid"]]))
        cols = max(1, int(row[F["hi3"]]) - int(row[F["lo3"]]) + 1)
        rows = min(-(-int(row[F["lanes"]]) // cols), int(row[F[f"hi{_SEQ}"]]) - int(row[F[f"lo{_SEQ}"]]) + 1)
        tiles[who] = max(tiles.get(who, 1), rows)
    return tiles


def _rows(rows: np.ndarray) -> str:
    """'32-47' or '32-47, 64' and so on: sorted indices folded into runs."""
    runs: list[list[int]] = []
    for j in (int(x) for x in rows):
        if runs and j == runs[-1][1] + 1:
            runs[-1][1] = j
        else:
            runs.append([j, j])
    text = ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs[:3])
    return text + (f" and {len(runs) - 3} more runs" if len(runs) > 3 else "")


# -- puzzle 9: parallel over query blocks ----------------------------------------------------------
@rule(
    ON_REQUEST,
    checks="the query blocks of one head run in programs of their own (no program's work reaches more than one)",
    message=(
        "Split the queries into blocks as well as the heads: launch a grid of (cdiv(N, BLOCK_M), B * H) "
        "so that each program keeps one block of Q on chip."
    ),
    needs=(ACCESS_LOG,),
    picture=ACCESS_MAP,
)
def parallel_over_queries(
    ctx: CaseContext,
    output: str = "o",
    min_n: int = 64,
    max_block_m: int = 128,
    key_inputs: tuple[str, ...] = ("k", "v"),
    message: str | None = None,
) -> Problem | None:
    """Once N spans several blocks (from N = `min_n`), no program's work reaches more query rows of one head than one
    query block: the query blocks of a head are computed by programs of their own.

    Counted in the work that reaches the output, not in the grid: a program that loaded keys (`key_inputs`, through
    copies) reaches the rows of `output` that it computed (`computed_by`: through scratch and copies) and those that
    programs reading what it computed went on to compute (`reached`: a merge of its partial results). A query block
    is the most rows of `output` one store held (lanes over columns). Idle programs of a padded grid reach nothing. A
    case where one block holds the whole sequence and N <= `max_block_m` (a query block a GPU kernel may well use,
    such as 128) cannot tell one program per head from one program per block: it passes.
    """
    q = ctx.inputs.get("q")
    log = log_of(ctx)
    if log is None or q is None or log.index(output) < 0:
        return None
    n = int(q.shape[2])
    if n < min_n:
        return None
    stores = rows_of(log, output, (STORE,))
    if not len(stores):
        return None
    cols = np.maximum(1, highs(stores, 3) - lows(stores, 3) + 1)
    block = int(np.minimum(-(-stores[:, F["lanes"]] // cols), highs(stores, _SEQ) - lows(stores, _SEQ) + 1).max())
    owners = _computed_rows(log, output)
    workers: set[tuple[int, int]] = set()
    for name in key_inputs:
        workers |= set(seen_by(log, name, LOAD, _SEQ))
    most, who, head = 0, None, (0, 0)
    for worker in sorted(workers or owners):
        rows = None
        for other in reached(log, {worker}):
            if other in owners:
                rows = owners[other] if rows is None else rows | owners[other]
        if rows is None:
            continue
        per_head = rows.sum(axis=2)  # (B, H): query rows of each head the worker's work reached
        if int(per_head.max()) > most:
            most, who = int(per_head.max()), worker
            head = tuple(int(i) for i in np.unravel_index(int(per_head.argmax()), per_head.shape))
    if who is None or (most <= block and (most <= max_block_m or n <= max_block_m)):
        return None
    measured = (
        f"Your {program_name(log, *who)} did the work of {most} query rows of head {head} (batch, head), N = {n}: "
        f"more than one query block of {min(block, max_block_m)} rows."
    )
    if most > max_block_m and block >= most:
        measured += (
            f" One store of {output} covers all {most} query rows: use query blocks of at most {max_block_m} rows."
        )
    return Problem(say(message, parallel_over_queries.message, measured))


def _computed_rows(log: Any, output: str) -> dict[tuple[int, int], np.ndarray]:
    """(launch, pid) -> (B, H, N) bool: the query rows of `output` whose values the program computed (`computed_by`);
    from the boxes of its stores where the log does not follow the output."""
    computed = computed_by(log, output)
    if computed:
        return {who: mask.any(axis=3) for who, mask in computed.items()}
    shape = log.regions[log.index(output)]["shape"][:3]
    found: dict[tuple[int, int], np.ndarray] = {}
    for row in rows_of(log, output, (STORE,)):
        who = (int(row[F["launch"]]), int(row[F["pid"]]))
        mask = found.setdefault(who, np.zeros(shape, dtype=bool))
        box = tuple(slice(int(row[F[f"lo{d}"]]), int(row[F[f"hi{d}"]]) + 1) for d in range(3))
        mask[box] = True
    return found


# -- puzzle 10: never store P ---------------------------------------------------------------------
@rule(
    ON_REQUEST,
    checks="the backward never stores an N x N matrix (P or dS)",
    message=(
        "Never store the N x N probabilities: recompute each tile of P from q, k and lse inside the loop "
        "(P = exp2(q k^T * qk_scale - lse2)) and use it at once."
    ),
    needs=(ACCESS_LOG,),
    picture=ACCESS_MAP,
)
def p_never_stored(
    ctx: CaseContext, factor: float = 3.0, square: float = 0.5, message: str | None = None
) -> Problem | None:
    """The submission's own buffers stay within `factor` x its inputs' total size, and none is an N x N one.

    Sizes: every buffer that is not an input (allocations, copies, scratch a kernel is launched with),
    in bytes. N x N: where N >= 8 D, so that no buffer of a few (B, H, N, D) tensors comes close, no
    buffer may hold `square` x B * H * N * N elements, whatever its dtype (P in float16 is still P).
    What the kernels store is not counted: accumulating dQ in global memory (tl.atomic_add, or
    FlashAttention-1's read, update, write) stores each of its elements once per key block,
    without ever holding P.
    """
    log = log_of(ctx)
    if log is None:
        return None
    input_bytes = sum(int(t.numel()) * int(t.element_size()) for t in ctx.inputs.values() if hasattr(t, "element_size"))
    own = [i for i, r in enumerate(log.regions) if r["role"] != "input"]
    if not own:
        return None

    def size_bytes(i: int) -> int:
        return log.regions[i]["size"] * log.regions[i]["element_size"]

    allocated = sum(size_bytes(i) for i in own)
    n_by_n = _score_matrix_elements(ctx)
    widest = max(own, key=lambda i: log.regions[i]["size"])
    square_buffer = n_by_n > 0 and log.regions[widest]["size"] >= square * n_by_n
    if allocated <= factor * input_bytes and not square_buffer:
        return None
    if square_buffer:
        size = log.regions[widest]["size"]
        measured = (
            f"The largest buffer is {_region_name(log.regions[widest])}: {size} elements, "
            f"{size / n_by_n:.2f} x B * H * N * N = {n_by_n}, an N x N matrix per head."
        )
    else:
        biggest = log.regions[max(own, key=size_bytes)]
        measured = (
            f"Your code allocated {_mb(allocated)} for {_mb(input_bytes)} of inputs "
            f"(at most {factor:g}x is allowed); the largest buffer is {_region_name(biggest)}."
        )
    largest = sorted(own, key=lambda i: -size_bytes(i))[:4]
    details = [f"{_region_name(log.regions[i])}: {_mb(size_bytes(i))}" for i in largest]
    return Problem(say(message, p_never_stored.message, measured), details=details)


def _score_matrix_elements(ctx: CaseContext) -> int:
    """B * H * N * N for attention inputs q (B, H, N, D) with N >= 8 D; 0 where an N x N buffer cannot be told apart."""
    q = ctx.inputs.get("q")
    if not isinstance(q, torch.Tensor) or q.dim() != 4:
        return 0
    b, h, n, d = (int(x) for x in q.shape)
    return b * h * n * n if n >= 8 * d else 0


def _region_name(region: dict[str, Any]) -> str:
    name, label = region["name"], region["label"]
    return label if name == label else f"{name} ({label})"


def _mb(n: float) -> str:
    return f"{n / 1e6:.2f} MB" if n >= 1e5 else f"{n / 1e3:.1f} kB"
