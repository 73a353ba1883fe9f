"""Method rules of the attention puzzles: how a kernel computed its answer, judged from the interpreter's access log.

Puzzle 4's grouped launch order is in `checks.engine.judging.rules.launch_order`, with the same interface.

Each rule is a pure function `rule(ctx: CaseContext, **params) -> Problem | None` (see
`checks.engine.judging.rules.problem`), declared beside it (`checks.engine.judging.rules.declare`). It reads
`ctx.obs.access`
(an `AccessLog.to_dict()`, None on a GPU: then the rulebook does not apply it), `ctx.inputs` and `ctx.case`,
and its parameters come from the puzzle's `rules:` entry in `puzzles.yaml`. A `message` parameter, when given,
replaces the rule's declared message; the measured numbers follow it.

A "tile" is what one tl.load touched: the box of indices of one record of the log.
"""

from __future__ import annotations

from typing import Any

import torch

from checks.engine.access.log import ATOMIC, LOAD, STORE, F
from checks.engine.access.queries import highs, log_of, lows, program_name, rows_of, stored_spans
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
    """With causal=True no program loads a tile that lies entirely on the masked side of the diagonal.

    A program that stores rows of `queries` (o, dq) owns those query rows: a K or V tile whose
    first key comes after its last query row is wasted. A program that stores rows of `keys`
    (dk, dv) owns those key rows: a Q or dO tile whose last query comes before its first key is.
    """
    if not bool(ctx.inputs.get("causal", bool(ctx.case.causal))):
        return None
    log = log_of(ctx)
    if log is None:
        return None
    key_owners = stored_spans(log, tuple(keys), _SEQ)
    query_owners = {k: v for k, v in stored_spans(log, tuple(queries), _SEQ).items() if k not in key_owners}
    wasted: list[str] = []
    shown: dict[int, int] = {}  # launch -> examples listed
    count = 0
    for inputs, owners, side in ((key_inputs, query_owners, "after"), (query_inputs, key_owners, "before")):
        for name in inputs:
            for row in rows_of(log, name, (LOAD, ATOMIC)):
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
                            f"{program_name(log, *key)} (owns {own} rows {first}-{last}) loaded {name} rows {lo}-{hi}"
                        )
    if not count:
        return None
    measured = f"Your kernels loaded {count} tiles that lie entirely on the masked side of the diagonal."
    return Problem(say(message, causal_skipping.message, measured), details=wasted)


# -- puzzle 9: parallel over query blocks ----------------------------------------------------------
@rule(
    ON_REQUEST,
    checks="the query blocks of one head run in programs of their own (more programs than B·H)",
    message=(
        "Split the queries into blocks as well as the heads: launch a grid of (cdiv(N, BLOCK_M), B * H) "
        "so that each program keeps one block of Q on chip."
    ),
    needs=(ACCESS_LOG,),
    picture=ACCESS_MAP,
)
def parallel_over_queries(
    ctx: CaseContext, output: str = "o", min_n: int = 64, max_block_m: int = 128, message: str | None = None
) -> Problem | None:
    """Once N spans several blocks (from N = `min_n`), the kernel that writes `output` runs more programs than B * H.

    The learner's query block is the most rows of o one store covers. A case where that block
    holds the whole sequence and N <= `max_block_m` (a query block a GPU kernel may well use, such
    as 128) cannot tell one program per head from one program per block: it passes.
    """
    q = ctx.inputs.get("q")
    log = log_of(ctx)
    if log is None or q is None:
        return None
    b, h, n = int(q.shape[0]), int(q.shape[1]), int(q.shape[2])
    if n < min_n:
        return None
    stores = rows_of(log, output, (STORE,))
    if not len(stores):
        return None
    launches = sorted({int(x) for x in stores[:, F["launch"]]})
    programs = max(log.programs(launch) for launch in launches)
    if programs > b * h:
        return None
    tallest = int((highs(stores, _SEQ) - lows(stores, _SEQ)).max()) + 1  # query rows in one store of o
    if tallest >= n and n <= max_block_m:
        return None  # one query block holds the whole sequence: this case cannot tell
    measured = (
        f"Your kernel that writes {output} ran {plural(programs, 'program')} for B * H = {b * h} heads and N = {n}."
    )
    if tallest >= n:
        measured += f" One store of {output} covers all {n} query rows: use query blocks of at most {max_block_m} rows."
    return Problem(say(message, parallel_over_queries.message, measured))


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
