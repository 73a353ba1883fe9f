"""Method rules of the prefill puzzles (14, 15): sequences of different lengths packed along the token dimension.

Each rule is a pure function `rule(ctx: CaseContext, **params) -> Problem | None` declared beside it, as in
`checks.engine.judging.rules.method`: it reads the interpreter's access log (None on a GPU: then the rulebook does
not apply it) and `ctx.inputs`, whose `cu_seqlens` says which tokens belong to which sequence.

    own_sequence              a program loads the queries, keys and values of one sequence only
    one_launch_per_kernel     each kernel is launched once for all sequences (no launch per sequence)
    no_padded_work            every program that loads the inputs stores results, and no buffer holds padding (the
                              kernels' own, or one the host filled with copies of the inputs)
    context_pages_in_table    15: only the cache slots a sequence's row of block_table lists, up to context_lens
    causal_skipping_packed    with causal=True, no key block past a program's last query is loaded
    kv_once_per_query_block   each key and value is loaded about once per block of queries, not once per query head

The log's questions they ask are the helpers just below (`token_loads`, `query_rows`, `query_blocks`,
`loads_per_element`, `distinct_touched`), one per question: which tokens of an input each load touched, which
tokens of the queries each program loaded over all its loads (the block it owns, however many loads it split the
tile into), the distinct such blocks of each sequence, how many times each element of an input was loaded, and how
many elements of the call's own buffers the kernels stored or loaded. How many times each element was loaded
is the one account of loads (`checks.engine.access.queries.loads_of`, through every copy of the input); which tokens a
program loaded reads the load records in the input's own index space (`rows_of`, a copy's loads included).
"""

from __future__ import annotations

import numpy as np
import torch

from checks.engine.access.log import LOAD, STORE, AccessLog, F
from checks.engine.access.queries import loads_of, log_of, program_name, rows_of, seen_by
from checks.engine.judging.rules.declare import ACCESS_LOG, ON_REQUEST, rule
from checks.engine.judging.rules.decoding import live_slots, page_owners
from checks.engine.judging.rules.pictures import ACCESS_MAP
from checks.engine.judging.rules.problem import CaseContext, Problem, say
from checks.verdict import agree, plural

Program = tuple[int, int]  # (launch, launch-order pid)
PACKED = ("q", "k", "v")  # the inputs packed along their first dimension, the tokens


# -- the questions the rules ask of the log ---------------------------------------------------------
def token_loads(log: AccessLog, name: str) -> list[tuple[Program, int, int]]:
    """(program, first token, last token) of each load of the packed input `name`, in the order they were made."""
    return [
        ((int(row[F["launch"]]), int(row[F["pid"]])), int(row[F["lo0"]]), int(row[F["hi0"]]))
        for row in rows_of(log, name, (LOAD,))
    ]


def loads_per_element(log: AccessLog, name: str) -> torch.Tensor:
    """How many times the kernels loaded each element of the input `name`, in its own index space, through every copy
    of it (the one account of loads, `checks.engine.access.queries.loads_of`)."""
    return loads_of(log, name)


def stored_spans(log: AccessLog, names: tuple[str, ...], dim: int) -> dict[Program, tuple[int, int]]:
    """(launch, pid) -> (first, last) index along `dim` the program stored in any of these regions."""
    spans: dict[Program, tuple[int, int]] = {}
    for name in names:
        for row in rows_of(log, name, (STORE,)):
            key = (int(row[F["launch"]]), int(row[F["pid"]]))
            lo, hi = int(row[F[f"lo{dim}"]]), int(row[F[f"hi{dim}"]])
            old = spans.get(key)
            spans[key] = (lo, hi) if old is None else (min(old[0], lo), max(old[1], hi))
    return spans


def query_rows(log: AccessLog, cu: np.ndarray, name: str = "q") -> dict[Program, dict[int, np.ndarray]]:
    """(launch, pid) -> sequence -> the sorted tokens of that sequence whose queries the program loaded, over all its
    loads of the packed input `name` (through copies too), element by element: the block of queries it owns, however
    many loads (or masks) it split the tile into."""
    owned: dict[Program, dict[int, np.ndarray]] = {}
    for who, tokens in seen_by(log, name, LOAD, 0).items():
        if len(tokens) == 0:
            continue
        sequences = sequence_of(cu, tokens)
        owned[who] = {int(b): tokens[sequences == b] for b in np.unique(sequences)}
    return owned


def query_blocks(log: AccessLog, cu: np.ndarray, name: str = "q") -> dict[int, set[tuple[int, ...]]]:
    """Sequence -> its blocks of queries: the distinct sets of its tokens that one program loaded of `name`
    (`query_rows`). Programs that load the same tokens (one per head, or per head of a group) are one block; so is a
    program that walks several blocks of one sequence in a loop (a persistent kernel), which is then allowed the
    loads of one block: the tokens it loaded are one set, whatever order or loads it took them in."""
    blocks: dict[int, set[tuple[int, ...]]] = {}
    for per_sequence in query_rows(log, cu, name).values():
        for b, tokens in per_sequence.items():
            blocks.setdefault(b, set()).add(tuple(int(t) for t in tokens))
    return blocks


def distinct_touched(log: AccessLog, kind: int) -> int:
    """Elements of the buffers that are not inputs (outputs and the call's own buffers) that the kernels stored
    (kind STORE) or loaded (LOAD) at least once."""
    counts = log.writes if kind == STORE else log.reads
    return sum(
        int((c > 0).sum()) for c, region in zip(counts, log.regions, strict=False) if region.get("role") != "input"
    )


def slot_loads(log: AccessLog, cache: str) -> np.ndarray:
    """(num_pages, page_size) int: the loads of each slot of a paged cache (num_pages, page_size, H_kv, D), over its
    heads and columns."""
    counts = loads_per_element(log, cache)
    return counts.reshape(counts.shape[0], counts.shape[1], -1).sum(-1).numpy()


def cache_loads(log: AccessLog, cache: str) -> list[tuple[Program, int, int]]:
    """(program, first page, last page) of each load of a paged cache."""
    return [(who, lo, hi) for who, lo, hi in token_loads(log, cache)]  # a cache's first dimension is its pages


def sequence_of(cu: np.ndarray, tokens: np.ndarray | int) -> np.ndarray:
    """The sequence each token belongs to (empty sequences hold none)."""
    return np.searchsorted(cu, tokens, side="right") - 1


def _cu(ctx: CaseContext) -> np.ndarray | None:
    cu = ctx.inputs.get("cu_seqlens")
    return cu.cpu().numpy().astype(np.int64) if isinstance(cu, torch.Tensor) else None


# -- 14, 15: a program keeps to its sequence -------------------------------------------------------
@rule(
    ON_REQUEST,
    checks="a program loads the queries, keys and values of one sequence only, never across a sequence's end",
    message=(
        "Keep each program inside its sequence: load its start and end from cu_seqlens, add the start to every "
        "token position, and mask every load at the sequence's end, not at the end of the packed tensor."
    ),
    needs=(ACCESS_LOG,),
    picture=ACCESS_MAP,
    explains_gpu_values=True,  # the tokens past a sequence's end are another sequence's: right addresses, wrong data
)
def own_sequence(ctx: CaseContext, inputs: tuple[str, ...] = PACKED, message: str | None = None) -> Problem | None:
    """No load of the packed `inputs` spans two sequences, and a program loads keys and values only of the sequences
    whose queries it loaded (`inputs[0]` is the queries)."""
    log, cu = log_of(ctx), _cu(ctx)
    if log is None or cu is None:
        return None
    mine: dict[Program, set[int]] = {}
    for name in inputs:
        if log.index(name) < 0:
            continue
        for who, lo, hi in token_loads(log, name):
            first, last = (int(s) for s in sequence_of(cu, np.array([lo, hi])))
            if first != last:
                measured = (
                    f"{program_name(log, *who)} loaded {name} tokens {lo}-{hi} in one load: tokens of sequence {first} "
                    f"(tokens {cu[first]}-{cu[first + 1] - 1}) and of sequence {last}."
                )
                return Problem(say(message, own_sequence.message, measured))
            if name == inputs[0]:
                mine.setdefault(who, set()).add(first)
            elif who in mine and first not in mine[who]:
                measured = (
                    f"{program_name(log, *who)} loaded the queries of sequence {min(mine[who])} and {name} tokens "
                    f"{lo}-{hi}, of sequence {first}."
                )
                return Problem(say(message, own_sequence.message, measured))
    return None


# -- 14, 15: one launch for all sequences ----------------------------------------------------------
@rule(
    ON_REQUEST,
    checks="each kernel is launched once for all the sequences, not once per sequence",
    message=(
        "Launch each kernel once for the whole batch: give the grid a dimension for the sequences (or one program per "
        "block of every sequence), and let each program find its sequence from cu_seqlens, instead of a Python loop "
        "over the sequences."
    ),
    needs=(ACCESS_LOG,),
)
def one_launch_per_kernel(
    ctx: CaseContext, inputs: tuple[str, ...] = PACKED, message: str | None = None
) -> Problem | None:
    """No kernel is launched more than once in one call, and the host function copies none of the packed `inputs`
    piece by piece, a copy per sequence (each copy on a GPU is a launch of torch's copy kernel: a Python loop over the
    sequences all the same)."""
    log = log_of(ctx)
    if log is None:
        return None
    looped = _copies_per_sequence(ctx, log, inputs)
    if looped:
        return Problem(say(message, one_launch_per_kernel.message, looped))
    launches: dict[str, int] = {}
    for launch in log.launches:
        launches[launch["kernel"]] = launches.get(launch["kernel"], 0) + 1
    again = {kernel: n for kernel, n in launches.items() if n > 1}
    if not again:
        return None
    kernel, n = next(iter(again.items()))
    cu = _cu(ctx)
    sequences = f" for {plural(len(cu) - 1, 'sequence')}" if cu is not None else ""
    measured = f"Your function launched `{kernel}` {n} times in one call{sequences}."
    return Problem(say(message, one_launch_per_kernel.message, measured))


def _copies_per_sequence(ctx: CaseContext, log: AccessLog, inputs: tuple[str, ...]) -> str:
    """The sentence for the first of the packed `inputs` that the plan copied in parts (copies of fewer than all its
    tokens), at least two and at least one per sequence that holds tokens; '' when none was."""
    cu = _cu(ctx)
    if cu is None:
        return ""
    sequences = int((np.diff(cu) > 0).sum())
    for name in inputs:
        tensor, i = ctx.inputs.get(name), log.index(name)
        if i < 0 or not isinstance(tensor, torch.Tensor) or tensor.dim() == 0:
            continue
        regions = {i, *log.copied(name)}
        parts = [
            copy
            for copy in log.copies
            if copy["src"]["region"] in regions and int(np.prod(copy["shape"])) < tensor.numel()
        ]
        if len(parts) >= max(2, sequences):
            return (
                f"Your function copied {name} in {len(parts)} parts for {plural(len(cu) - 1, 'sequence')}: a "
                "copy per sequence is a Python loop over the sequences (on a GPU, a launch of torch's copy kernel "
                "each)."
            )
    return ""


# -- 14, 15: no padding -----------------------------------------------------------------------------
@rule(
    ON_REQUEST,
    checks=(
        "every program that loads the inputs stores results, and the kernels store and load no more elements of the "
        "call's own buffers than the real tokens need (no copy padded to the longest sequence)"
    ),
    message=(
        "Do no work for padding: a program whose block starts past its sequence's end returns before it loads "
        "anything, and the kernels read the packed tensors where they are instead of copying them into a buffer "
        "padded to max_seqlen."
    ),
    needs=(ACCESS_LOG,),
    picture=ACCESS_MAP,
)
def no_padded_work(
    ctx: CaseContext,
    inputs: tuple[str, ...] = PACKED,
    tail: int = 128,
    per_token: float = 2.0,
    message: str | None = None,
) -> Problem | None:
    """Each program that loads one of the packed `inputs` stores something; no buffer that the host function filled
    with copies of one of them (`AccessLog.copies`, in one copy or one per sequence) holds more token rows than the
    real tokens and a tail of `tail` tokens per sequence (a block's worth past each end); and the elements of the
    buffers that are not inputs which the kernels stored, or loaded, number at most `per_token` times the output's
    elements per token (o and lse), for those tokens."""
    log, cu = log_of(ctx), _cu(ctx)
    q = ctx.inputs.get(inputs[0])
    if log is None or cu is None or not isinstance(q, torch.Tensor):
        return None
    storing = {(int(row[F["launch"]]), int(row[F["pid"]])) for row in log.records.numpy() if row[F["kind"]] == STORE}
    for name in inputs:
        if log.index(name) < 0 or log.dropped:  # past the log's records, a program's stores may be unrecorded
            continue
        idle = sorted({who for who, _, _ in token_loads(log, name)} - storing)
        if idle:
            measured = (
                f"{plural(len(idle), 'program')} loaded {name} and stored nothing, {program_name(log, *idle[0])} "
                "first: its loads were work for no output."
            )
            return Problem(say(message, no_padded_work.message, measured))
    tokens, heads, d = int(q.shape[0]), int(q.shape[1]), int(q.shape[2])
    padded = _padded_copy(log, ctx.inputs, inputs, cu, tokens + (len(cu) - 1) * tail)
    if padded:
        return Problem(say(message, no_padded_work.message, padded))
    allowed = per_token * (tokens + (len(cu) - 1) * tail) * heads * (d + 1)
    for kind, verb in ((STORE, "stored"), (LOAD, "loaded")):
        touched = distinct_touched(log, kind)
        if touched > allowed:
            measured = (
                f"Your kernels {verb} {touched} elements of the outputs and of buffers your function allocated, where "
                f"{tokens} tokens in {plural(len(cu) - 1, 'sequence')} need at most {int(allowed)} (the longest "
                f"sequence has {int(np.diff(cu).max())} tokens: a buffer padded to it holds "
                f"{(len(cu) - 1) * int(np.diff(cu).max())} token rows)."
            )
            return Problem(say(message, no_padded_work.message, measured))
    return None


def _padded_copy(log: AccessLog, inputs: dict[str, object], names: tuple[str, ...], cu: np.ndarray, rows: int) -> str:
    """The sentence for the first buffer that the host function (the plan) filled with copies of one of the packed
    inputs `names` and that holds more than `rows` token rows of it (the real tokens and a block's tail per
    sequence): a buffer padded to max_seqlen, however it was filled (one `copy_` per sequence in a loop, or one
    copy); '' when none does."""
    for name in names:
        tensor = inputs.get(name)
        if log.index(name) < 0 or not isinstance(tensor, torch.Tensor) or tensor.dim() == 0 or tensor.shape[0] == 0:
            continue
        per_row = max(1, tensor.numel() // int(tensor.shape[0]))
        for r in log.copied(name):
            region = log.regions[r]
            held = int(region["size"]) // per_row
            if region.get("role") == "input" or held <= rows:
                continue
            made = sum(1 for copy in log.copies if copy["dst"]["region"] == r)
            longest, sequences = int(np.diff(cu).max()), len(cu) - 1
            return (
                f"Your function copied {name} ({int(tensor.shape[0])} tokens) into a buffer of {held} token rows, "
                f"with {made} {agree(made, 'copy', 'copies')}, where the real tokens and a block's tail per sequence "
                f"need at most {rows} (the longest sequence has {longest} tokens: padded to it, "
                f"{plural(sequences, 'sequence')} take {sequences * longest} token rows)."
            )
    return ""


# -- 15: the context's pages ------------------------------------------------------------------------
@rule(
    ON_REQUEST,
    checks=(
        "a sequence's programs read only the cache pages its row of `block_table` lists, and no slot past "
        "`context_lens`"
    ),
    message=(
        "Read only the sequence's own context: for cached key j of sequence b, load page block_table[b, j // "
        "page_size] at slot j % page_size, and mask every j >= context_lens[b]."
    ),
    needs=(ACCESS_LOG,),
    picture=ACCESS_MAP,
    explains_gpu_values=True,  # the slots past a context hold NaN, and a page number past the table faults on a GPU
)
def context_pages_in_table(
    ctx: CaseContext, caches: tuple[str, ...] = ("k_cache", "v_cache"), message: str | None = None
) -> Problem | None:
    """No slot of the `caches` is loaded unless it holds one of a sequence's first context_lens[b] cached tokens, and
    a program that loads the new queries of sequence b loads no page of another sequence's context."""
    log, cu = log_of(ctx), _cu(ctx)
    cache, table, contexts = (ctx.inputs.get(name) for name in (caches[0], "block_table", "context_lens"))
    if log is None or cu is None or not isinstance(cache, torch.Tensor) or not isinstance(contexts, torch.Tensor):
        return None
    num_pages, page_size = int(cache.shape[0]), int(cache.shape[1])
    live = live_slots(table, contexts, page_size, num_pages)
    owner = page_owners(table, contexts, page_size, num_pages)
    mine: dict[Program, set[int]] = {}
    for who, lo, _ in token_loads(log, "q") if log.index("q") >= 0 else []:
        mine.setdefault(who, set()).add(int(sequence_of(cu, lo)))
    for name in caches:
        if log.index(name) < 0:
            continue
        dead = (slot_loads(log, name) > 0) & ~live
        if dead.any():
            pages = sorted({int(p) for p in np.nonzero(dead)[0]})
            listed = [p for p in pages if owner[p] >= 0]
            where = f" ({_few(listed)} listed in block_table, past context_lens there)" if listed else ""
            measured = (
                f"Your kernels loaded from {name} {int(dead.sum())} slots that hold no cached token of any sequence, "
                f"in pages {_few(pages)}{where or ' (pages no context uses)'}."
            )
            return Problem(say(message, context_pages_in_table.message, measured))
        for who, first, last in cache_loads(log, name):
            own = mine.get(who)
            if not own or len(own) != 1:
                continue
            for page in (first, last):
                if owner[page] >= 0 and int(owner[page]) not in own:
                    measured = (
                        f"{program_name(log, *who)} loaded the queries of sequence {next(iter(own))} and page {page} "
                        f"of {name}, a page of sequence {int(owner[page])}'s context."
                    )
                    return Problem(say(message, context_pages_in_table.message, measured))
    return None


def _few(items: list[int], most: int = 6) -> str:
    return ", ".join(str(i) for i in items[:most]) + (f" and {len(items) - most} more" if len(items) > most else "")


# -- 14, 15: causal skipping within each sequence ---------------------------------------------------
@rule(
    ON_REQUEST,
    checks="with causal=True, no program loads a key block that lies wholly after its last query",
    message=(
        "Skip the key blocks that causal attention masks entirely: a program that owns a block of queries stops its "
        "loop over the keys after its last query's token."
    ),
    needs=(ACCESS_LOG,),
    picture=ACCESS_MAP,
)
def causal_skipping_packed(
    ctx: CaseContext,
    keys: tuple[str, ...] = ("k", "v"),
    outputs: tuple[str, ...] = ("o",),
    queries: str = "q",
    message: str | None = None,
) -> Problem | None:
    """With causal=True, a program that owns tokens first..last loads no token after `last` of the packed `keys`
    (tokens of its own sequence: `own_sequence` judges the rest). A program owns the tokens of `queries` it loaded
    (all its loads of them, `query_rows`) and those of `outputs` it stored; where it did both, its last token is the
    lower of the two, so that neither a store into scratch that another kernel copies (or casts) into the output nor
    a stray load of a later query hides a key block it did not need."""
    if not bool(ctx.inputs.get("causal", True)):
        return None
    log = log_of(ctx)
    if log is None:
        return None
    owners = stored_spans(log, outputs, 0)
    cu = _cu(ctx)
    if cu is not None and log.index(queries) >= 0:
        for who, per_sequence in query_rows(log, cu, queries).items():
            first = min(int(rows[0]) for rows in per_sequence.values())
            last = max(int(rows[-1]) for rows in per_sequence.values())
            old = owners.get(who)
            owners[who] = (first, last) if old is None else (min(first, old[0]), min(last, old[1]))
    wasted, shown = 0, []
    for name in keys:
        if log.index(name) < 0:
            continue
        for who, lo, hi in token_loads(log, name):
            if who in owners and lo > owners[who][1]:
                wasted += 1
                if len(shown) < 3:
                    first, last = owners[who]
                    program = program_name(log, *who)
                    shown.append(f"{program} (owns tokens {first}-{last}) loaded {name} tokens {lo}-{hi}")
    if not wasted:
        return None
    measured = f"Your kernels loaded {plural(wasted, 'key block')} lying wholly after the last query of their program."
    return Problem(say(message, causal_skipping_packed.message, measured), details=shown)


# -- 14, 15: K and V once per block of queries -------------------------------------------------------
@rule(
    ON_REQUEST,
    checks="each element of K and V is loaded about once per block of queries of its sequence, not once per query head",
    message=(
        "Load each tile of K and V once for the whole group of query heads that shares it: let the rows of the query "
        "tile be (token, head) pairs of the G heads of one kv head, as in puzzle 12."
    ),
    needs=(ACCESS_LOG,),
    picture=ACCESS_MAP,
)
def kv_once_per_query_block(
    ctx: CaseContext,
    keys: tuple[str, ...] = ("k", "v"),
    caches: tuple[str, ...] = (),
    slack: float = 1.5,
    message: str | None = None,
) -> Problem | None:
    """In each sequence, each element of `keys` is loaded on average at most `slack` times the number of blocks of
    queries of that sequence the kernels loaded (`query_blocks`: the distinct sets of tokens one program loaded of q,
    over all its loads, so that a tile split into several loads is one block; with causal=True, the blocks that reach
    the key). The slack leaves room for key blocks that run past a block's last query to the end of
    their tile; loading K and V once per query head of a group of 2 or more exceeds it. The paged `caches` (15) are
    judged alike: every block of new queries of a sequence needs each key of its context once."""
    log, cu = log_of(ctx), _cu(ctx)
    q = ctx.inputs.get("q")
    if log is None or cu is None or not isinstance(q, torch.Tensor) or log.index("q") < 0:
        return None
    causal = bool(ctx.inputs.get("causal", False))
    blocks = query_blocks(log, cu)
    for name in keys:
        if log.index(name) < 0:
            continue
        counts = loads_per_element(log, name).double()  # (T, H_kv, D)
        for b in range(len(cu) - 1):
            start, end = int(cu[b]), int(cu[b + 1])
            if end <= start:
                continue
            per_head = counts[start:end].mean(dim=(0, 2))  # (H_kv,)
            most = float(per_head.max())
            spans = sorted((rows[0], rows[-1]) for rows in blocks.get(b, ()))
            allowed = slack * _blocks_per_key(spans, start, end, causal)
            if most > allowed + 1e-6:
                group = int(q.shape[1]) // max(1, int(counts.shape[1]))
                measured = (
                    f"Your kernels loaded each element of {name} of sequence {b} {most:.2f} times on average, for "
                    f"{plural(len(blocks.get(b, ())), 'block')} of its queries ({allowed:.2f} times allowed); here "
                    f"G = {group} query heads share each kv head."
                )
                return Problem(say(message, kv_once_per_query_block.message, measured))
    for name in caches:
        if log.index(name) < 0:
            continue
        problem = _context_reads(ctx, log, name, blocks, slack)
        if problem:
            return Problem(say(message, kv_once_per_query_block.message, problem))
    return None


def _context_reads(
    ctx: CaseContext, log: AccessLog, name: str, blocks: dict[int, set[tuple[int, ...]]], slack: float
) -> str:
    """The sentence for the first sequence whose cached keys in `name` were loaded more than `slack` times per block
    of its new queries, on average over its context's slots and kv heads; '' when none was."""
    table, contexts = ctx.inputs["block_table"].cpu().numpy(), ctx.inputs["context_lens"].cpu().tolist()
    counts = slot_loads(log, name)  # (num_pages, page_size), summed over kv heads and columns
    heads_d = int(np.prod(ctx.inputs[name].shape[2:]))
    size = counts.shape[1]
    for b, n in enumerate(contexts):
        if n == 0:
            continue
        j = np.arange(int(n))
        seen = float(counts[table[b, j // size], j % size].sum()) / (n * heads_d)
        allowed = slack * max(1, len(blocks.get(b, ())))
        if seen > allowed + 1e-6:
            return (
                f"Your kernels loaded each cached key of sequence {b} in {name} {seen:.2f} times on average, for "
                f"{plural(len(blocks.get(b, ())), 'block')} of its new queries ({allowed:.2f} times allowed)."
            )
    return ""


def _blocks_per_key(blocks: list[tuple[int, int]], start: int, end: int, causal: bool) -> float:
    """The loads of a key that the blocks of queries (first, last token) need, averaged over the sequence's keys
    start..end - 1: every block needs every key, or with causal=True the keys up to its last token; at least 1."""
    if not blocks:
        return 1.0
    keys = np.arange(start, end)
    lasts = np.array([hi for _, hi in blocks])
    needed = (lasts[None, :] >= keys[:, None]).sum(axis=1) if causal else np.full(len(keys), len(blocks))
    return float(max(1.0, needed.mean()))
