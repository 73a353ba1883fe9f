"""Method rules of the decoding puzzles (11-13): how the kernels read the cache of keys and values.

Each rule is a pure function `rule(ctx: CaseContext, **params) -> Problem | None` declared beside it
(`checks.engine.judging.rules.declare`), as in `checks.engine.judging.rules.method`: it reads the interpreter's
access log
(`ctx.obs.access`, None on a GPU: then the rulebook does not apply it) and `ctx.inputs`; its
parameters come from the puzzle's `rules:` entry in `puzzles.yaml`, and a `message` parameter
replaces its declared message (the measured numbers follow it).

    split_kv            11, 12, 13: a long key range of few heads is read by several programs
    kv_once_per_group   12: each element of K and V is loaded about once, not once per query head
    pages_in_table      13: only the cache slots a sequence's row of block_table lists, up to seq_lens

A "stream" is the keys of one (batch, kv head): k[b, h] in 11 and 12, the pages of sequence b for
kv head h in 13. `key_readers` says which programs loaded each stream's keys; the access map of
these puzzles (map kind `decoding`, `checks.learner.maps`) draws it.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import torch

from checks.engine.access.log import LOAD, AccessLog, F
from checks.engine.access.queries import load_count, loads_of, log_of, program_name, rows_of, seen_by
from checks.engine.judging.rules.declare import ACCESS_LOG, ON_REQUEST, rule
from checks.engine.judging.rules.pictures import ACCESS_MAP
from checks.engine.judging.rules.problem import CaseContext, Problem, say
from checks.verdict import plural

_PAGED = "k_cache"  # the key input of puzzle 13; 11 and 12 call it k


# -- what the rules ask of a case -------------------------------------------------------------------
def page_owners(block_table: torch.Tensor, seq_lens: torch.Tensor, page_size: int, num_pages: int) -> np.ndarray:
    """For each page of the cache, the sequence whose first seq_lens[b] keys use it; -1 for no sequence."""
    owner = np.full(num_pages, -1, dtype=np.int64)
    table = block_table.cpu().numpy()
    for b, n in enumerate(seq_lens.cpu().tolist()):
        for page in table[b, : -(-int(n) // page_size)]:
            owner[int(page)] = b
    return owner


def live_slots(block_table: torch.Tensor, seq_lens: torch.Tensor, page_size: int, num_pages: int) -> np.ndarray:
    """(num_pages, page_size) bool: the slots that hold one of a sequence's first seq_lens[b] keys."""
    live = np.zeros((num_pages, page_size), dtype=bool)
    table = block_table.cpu().numpy()
    for b, n in enumerate(seq_lens.cpu().tolist()):
        for j in range(-(-int(n) // page_size)):
            live[int(table[b, j]), : min(page_size, int(n) - j * page_size)] = True
    return live


def streams(ctx: CaseContext) -> dict[tuple[int, int], int] | None:
    """(batch, kv head) -> its number of keys, from the inputs; None when the case has no keys."""
    k = ctx.inputs.get("k")
    if isinstance(k, torch.Tensor) and k.dim() == 4:
        b, h, n, _ = (int(x) for x in k.shape)
        return {(z, y): n for z in range(b) for y in range(h)}
    cache, seq_lens = ctx.inputs.get(_PAGED), ctx.inputs.get("seq_lens")
    if isinstance(cache, torch.Tensor) and isinstance(seq_lens, torch.Tensor):
        return {(z, y): int(n) for z, n in enumerate(seq_lens.tolist()) for y in range(int(cache.shape[2]))}
    return None


def key_readers(ctx: CaseContext, log: AccessLog) -> dict[tuple[int, int], set[tuple[int, int]]]:
    """(batch, kv head) -> the (launch, pid) of every program that loaded some of its keys.

    A load that spans several heads (or, in a paged cache, whose first page belongs to a sequence)
    counts for each of them; a load of a page no sequence uses counts for none.
    """
    readers: dict[tuple[int, int], set[tuple[int, int]]] = {}
    if ctx.inputs.get("k") is not None:
        for row in rows_of(log, "k", (LOAD,)):
            who = (int(row[F["launch"]]), int(row[F["pid"]]))
            for z in range(int(row[F["lo0"]]), int(row[F["hi0"]]) + 1):
                for y in range(int(row[F["lo1"]]), int(row[F["hi1"]]) + 1):
                    readers.setdefault((z, y), set()).add(who)
        return readers
    owner = _owners(ctx)
    for row in rows_of(log, _PAGED, (LOAD,)):
        z = int(owner[int(row[F["lo0"]])])
        if z < 0:
            continue
        who = (int(row[F["launch"]]), int(row[F["pid"]]))
        for y in range(int(row[F["lo2"]]), int(row[F["hi2"]]) + 1):
            readers.setdefault((z, y), set()).add(who)
    return readers


def _owners(ctx: CaseContext) -> np.ndarray:
    cache = ctx.inputs[_PAGED]
    return page_owners(ctx.inputs["block_table"], ctx.inputs["seq_lens"], int(cache.shape[1]), int(cache.shape[0]))


# -- 11, 12, 13: split the key range ----------------------------------------------------------------
@rule(
    ON_REQUEST,
    checks=(
        "when a head's keys span many blocks and B·H is small, several programs share one head's keys and their "
        "partial results are merged"
    ),
    message=(
        "Split the keys of each head over several programs: launch a grid of (splits, B * H) in which each program "
        "walks its own range of key blocks and stores a partial (output, logsumexp), then merge the splits of each "
        "head in a second kernel."
    ),
    needs=(ACCESS_LOG,),
    picture=ACCESS_MAP,
)
def split_kv(ctx: CaseContext, min_n: int = 256, max_heads: int = 64, message: str | None = None) -> Problem | None:
    """When there are at most `max_heads` (batch, kv head) streams, every stream of at least `min_n` keys
    is read by more than one program.

    B * H programs, one per head, leave most of a GPU idle when B * H is small; splitting each long
    key range gives every SM work. Short streams, or many of them, may be read by one program each.
    """
    log = log_of(ctx)
    found = streams(ctx)
    if log is None or not found or len(found) > max_heads:
        return None
    readers = key_readers(ctx, log)
    alone = sorted(s for s, n in found.items() if n >= min_n and len(readers.get(s, ())) == 1)
    if not alone:
        return None
    z, y = alone[0]
    measured = (
        f"This case has {plural(len(found), 'head')} of K and V (batch x kv head), too few to keep a GPU busy with "
        f"one program each, and the keys of {plural(len(alone), 'head')} with {min_n} or more keys were read by one "
        f"program each (batch {z}, head {y}: {plural(found[alone[0]], 'key')}, all read by "
        f"{program_name(log, *min(readers[alone[0]]))})."
    )
    return Problem(say(message, split_kv.message, measured))


# -- 12: one read of K and V per group of query heads -----------------------------------------------
@rule(
    ON_REQUEST,
    before=split_kv.name,
    checks="each element of K and V is read about once in all, not once per query head of its group",
    message=(
        "Load each tile of K and V once for the whole group of query heads that shares it: one program per "
        "(batch, kv head) handles its G query heads together, as the rows of one tl.dot."
    ),
    needs=(ACCESS_LOG,),
    picture=ACCESS_MAP,
)
def kv_once_per_group(
    ctx: CaseContext, keys: tuple[str, ...] = ("k", "v"), max_reads: float = 1.0, message: str | None = None
) -> Problem | None:
    """Each element of the inputs `keys` (K and V) is loaded at most `max_reads` times on average (once: not once
    per query head), counting its loads through every copy of it (`loads_of`).

    In a paged cache (13) the average is over the slots the sequences use, and reads of other
    slots are `pages_in_table`'s to judge.
    """
    log = log_of(ctx)
    if log is None:
        return None
    q = ctx.inputs.get("q")
    for name in keys:
        i = log.index(name)
        if i < 0:
            continue
        used = _used_elements(ctx, name, log.regions[i])
        seen = load_count(log, name) / max(1, used)  # loads_of's total: through every copy, a clone read per head too
        if seen <= max_reads + 1e-6:
            continue
        heads_kv = int(log.regions[i]["shape"][1 if name in ("k", "v") else 2])
        group = int(q.shape[1]) // max(1, heads_kv) if isinstance(q, torch.Tensor) else 1
        measured = (
            f"Your kernels read each element of {name} {seen:.2f} times on average (at most {max_reads:g} allowed); "
            f"here G = {group} query heads share each kv head."
        )
        return Problem(say(message, kv_once_per_group.message, measured))
    return None


def _used_elements(ctx: CaseContext, name: str, region: dict[str, Any]) -> int:
    """The elements a right kernel reads: the whole tensor, or in a paged cache the live slots."""
    if ctx.inputs.get("seq_lens") is None or name not in ("k_cache", "v_cache"):
        return int(region["numel"])
    _, _, heads, d = region["shape"]
    return int(ctx.inputs["seq_lens"].sum()) * int(heads) * int(d)


# -- 13: only the pages of the table, up to seq_lens ------------------------------------------------
@rule(
    ON_REQUEST,
    before=kv_once_per_group.name,  # and split_kv: reading slots past seq_lens raises the read counts, and is the cause
    checks="a sequence's programs read only the pages its row of `block_table` lists, and no slot past `seq_lens`",
    message=(
        "Read only the keys of the sequence: for key j of sequence b, load page block_table[b, j // page_size] at "
        "slot j % page_size, and mask every key j >= seq_lens[b]."
    ),
    needs=(ACCESS_LOG,),
    picture=ACCESS_MAP,
    explains_gpu_values=True,  # a page no sequence owns holds NaN, and a page number past the table faults on a GPU
)
def pages_in_table(
    ctx: CaseContext, caches: tuple[str, ...] = ("k_cache", "v_cache"), message: str | None = None
) -> Problem | None:
    """No slot of the cache is loaded, directly or through any copy of it (`loads_of`), unless it holds one of a
    sequence's first seq_lens[b] keys, and a program that loads the query of sequence b loads no page of another
    sequence.

    `caches` are the paged K and V inputs, judged against the inputs block_table and seq_lens.
    """
    log = log_of(ctx)
    cache = ctx.inputs.get(caches[0])
    if log is None or not isinstance(cache, torch.Tensor):
        return None
    num_pages, page_size = int(cache.shape[0]), int(cache.shape[1])
    live = live_slots(ctx.inputs["block_table"], ctx.inputs["seq_lens"], page_size, num_pages)
    owner = _owners(ctx)
    for name in caches:
        if log.index(name) < 0:
            continue
        counts = loads_of(log, name).numpy().reshape(num_pages, page_size, -1).sum(axis=2)  # through copies too
        dead = (counts > 0) & ~live
        if dead.any():
            pages = sorted({int(p) for p in np.nonzero(dead)[0]})
            listed = [p for p in pages if owner[p] >= 0]
            what = f"{int(dead.sum())} slots that hold no key of any sequence, in pages {_few(pages)}" + (
                f" ({_few(listed)} listed in block_table, past seq_lens there)"
                if listed
                else " (pages no sequence uses)"
            )
            return Problem(say(message, pages_in_table.message, f"Your kernels loaded from {name} {what}."))
    stray = _foreign_pages(log, caches, owner)
    if stray:
        return Problem(say(message, pages_in_table.message, stray))
    return None


def keys_never_read(ctx: CaseContext, caches: tuple[str, ...] = ("k_cache", "v_cache"), **_: Any) -> str:
    """From the access log: the keys of each sequence (below seq_lens[b]) that no program loaded from a paged cache,
    for some kv head, as a sentence; '' when every key was read. When every sequence misses exactly its last few
    keys, the sentence says so: the bound of the keys is short of seq_lens[b] (by a page, when that many)."""
    log = log_of(ctx)
    cache = ctx.inputs.get(caches[0])
    if log is None or not isinstance(cache, torch.Tensor) or cache.dim() != 4:
        return ""
    num_pages, page_size, heads = (int(n) for n in cache.shape[:3])
    table, lens = ctx.inputs["block_table"].cpu().numpy(), ctx.inputs["seq_lens"].cpu().numpy()
    for name in caches:
        if log.index(name) < 0:
            continue
        counts = loads_of(log, name).numpy().reshape(num_pages, page_size, heads, -1).sum(axis=3)
        missed: dict[int, list[int]] = {}
        for b, length in enumerate(lens):
            keys = np.arange(int(length))
            pages = table[b, keys // page_size]
            read = (counts[pages, keys % page_size] > 0).all(axis=1)  # by every kv head
            if not read.all():
                missed[b] = [int(j) for j in keys[~read]]
        if not missed:
            continue
        parts = [
            f"{_runs(keys)} of sequence {b} ({'all' if len(keys) == int(lens[b]) else len(keys)} of {int(lens[b])})"
            for b, keys in list(missed.items())[:6]
        ]
        more = f" and keys of {len(missed) - 6} more sequences" if len(missed) > 6 else ""
        text = f"your kernels never loaded the keys {'; '.join(parts)}{more} from {name}"
        tail_of = {
            b: int(lens[b]) - keys[0] for b, keys in missed.items() if keys == list(range(keys[0], int(lens[b])))
        }
        tails = set(tail_of.values())
        every = len(tail_of) == len(missed) == sum(1 for n in lens if int(n) > 0) and min(lens) > 0
        whole_pages = all(_whole_pages(keys, int(lens[b]), page_size) for b, keys in missed.items())
        if every and len(tails) == 1:  # each sequence's missed keys are its last ones, as many in each
            (tail,) = tails
            pages = "one page" if tail == page_size else f"{tail // page_size} pages"
            page = f" ({pages})" if tail % page_size == 0 else ""
            text += (
                f": every sequence misses its last {plural(tail, 'key')}{page}, so the programs' key range ends "
                f"{tail} short of seq_lens[b]; let it run to seq_lens[b]"
            )
        elif whole_pages:
            text += (
                ": the keys missed are whole pages (each run starts at a page's first slot and ends at its last, or "
                "at seq_lens[b]), so your kernels read other pages in their place or none; look up the page of "
                "every key, block_table[b, j // page_size], one per key: a block of keys may span several pages"
            )
        else:
            text += ": every key j < seq_lens[b] of sequence b counts; make the programs' key ranges cover them all"
        return text + " (the interpreter's log shows which cache rows your kernels loaded)."
    return ""


def _whole_pages(keys: list[int], length: int, page_size: int) -> bool:
    """Whether sorted keys of a sequence of `length` keys come in whole pages: every run starts at a page's first
    slot and ends at its last, or at the sequence's end."""
    starts = [j for i, j in enumerate(keys) if i == 0 or keys[i - 1] != j - 1]
    ends = [j for i, j in enumerate(keys) if i == len(keys) - 1 or keys[i + 1] != j + 1]
    return all(a % page_size == 0 for a in starts) and all((e + 1) % page_size == 0 or e + 1 == length for e in ends)


def _runs(keys: list[int]) -> str:
    """'256-299' or '3, 7-9': sorted keys folded into runs."""
    runs: list[list[int]] = []
    for j in keys:
        if runs and j == runs[-1][1] + 1:
            runs[-1][1] = j
        else:
            runs.append([j, j])
    text = ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs[:4])
    return text + (f" and {len(runs) - 4} more runs" if len(runs) > 4 else "")


def _foreign_pages(log: AccessLog, caches: tuple[str, ...], owner: np.ndarray) -> str:
    """'A program of sequence b loaded page p of sequence c', or '' when each program kept to its own sequence.

    A program's sequence is the batch index of the q it loaded; the first and last page of each of its
    loads (what the log's box records) must belong to that sequence.
    """
    sequence: dict[tuple[int, int], set[int]] = {}
    for row in rows_of(log, "q", (LOAD,)):
        who = (int(row[F["launch"]]), int(row[F["pid"]]))
        sequence.setdefault(who, set()).update(range(int(row[F["lo0"]]), int(row[F["hi0"]]) + 1))
    for name in caches:
        for row in rows_of(log, name, (LOAD,)):
            who = (int(row[F["launch"]]), int(row[F["pid"]]))
            mine = sequence.get(who)
            if not mine or len(mine) != 1:
                continue
            for page in (int(row[F["lo0"]]), int(row[F["hi0"]])):
                if owner[page] >= 0 and int(owner[page]) not in mine:
                    return (
                        f"{program_name(log, *who)} loaded the query of sequence {next(iter(mine))} and page {page} "
                        f"of {name}, a page of sequence {int(owner[page])}."
                    )
    return ""


def _few(items: list[int], most: int = 6) -> str:
    shown = ", ".join(str(i) for i in items[:most])
    return shown + (f" and {len(items) - most} more" if len(items) > most else "")


# -- the access map ---------------------------------------------------------------------------------
class KeyMap(NamedTuple):
    """What the access map of a decoding puzzle draws, one row per (batch, kv head)."""

    programs: np.ndarray  # (streams, keys): the launch-order pid of the program that last loaded each key; -1 none
    reads: np.ndarray  # (streams, keys): times each key was loaded (the average over its D columns of K)
    labels: list[str]  # "b0 h1" for each stream
    ends: list[int]  # each stream's number of keys: in a paged cache, the slots past it hold no key of it


def reader_image(ctx_inputs: dict[str, Any], log: AccessLog) -> KeyMap:
    """The key map of a recording. In a paged cache a row covers every slot its row of block_table lists
    (max_pages * page_size keys), so that loads past seq_lens show."""
    ctx = CaseContext(None, {}, ctx_inputs, [], [], None)  # type: ignore[arg-type]
    found = streams(ctx) or {}
    keys = sorted(found)
    row_of = {s: i for i, s in enumerate(keys)}
    labels, ends = [f"b{z} h{y}" for z, y in keys], [found[s] for s in keys]
    if ctx_inputs.get("k") is not None:
        width = max(found.values(), default=1)
        image, reads = np.full((len(keys), width), -1.0), np.zeros((len(keys), width))
        for row in rows_of(log, "k", (LOAD,)):
            for z in range(int(row[F["lo0"]]), int(row[F["hi0"]]) + 1):
                for y in range(int(row[F["lo1"]]), int(row[F["hi1"]]) + 1):
                    if (z, y) in row_of:
                        image[row_of[(z, y)], int(row[F["lo2"]]) : int(row[F["hi2"]]) + 1] = row[F["pid"]]
        if log.index("k") >= 0:
            reads[:] = loads_of(log, "k").numpy().mean(axis=-1).reshape(len(keys), width)  # (B, H, N, D)
        return KeyMap(image, reads, labels, ends)
    cache = ctx_inputs[_PAGED]
    page_size, heads = int(cache.shape[1]), int(cache.shape[2])
    table = ctx_inputs["block_table"].cpu().numpy()
    width = table.shape[1] * page_size
    image, reads = np.full((len(keys), width), -1.0), np.zeros((len(keys), width))
    counts = loads_of(log, _PAGED).numpy() if log.index(_PAGED) >= 0 else np.zeros(tuple(cache.shape))
    first_key: dict[int, tuple[int, int, int]] = {}  # a page a sequence uses -> (the sequence, its first key, its end)
    for b, n in _sequences(found):
        for j in range(table.shape[1]):
            page = int(table[b, j])
            if j * page_size < n:
                first_key[page] = (b, j * page_size, n)
            for y in range(heads):
                reads[row_of[(b, y)], j * page_size : (j + 1) * page_size] = counts[page, :, y].mean(axis=-1)
    pages_of = seen_by(log, _PAGED, LOAD, 0)  # element by element: a block of keys may span several pages
    for row in rows_of(log, _PAGED, (LOAD,)):
        lo, hi = int(row[F["lo0"]]), int(row[F["hi0"]])
        seen = pages_of.get((int(row[F["launch"]]), int(row[F["pid"]])))
        for page in (lo, hi) if seen is None else [int(p) for p in seen if lo <= p <= hi]:
            if page not in first_key:
                continue
            b, start, n = first_key[page]
            for y in range(int(row[F["lo2"]]), int(row[F["hi2"]]) + 1):
                if (b, y) in row_of:
                    image[row_of[(b, y)], start : min(start + page_size, n)] = row[F["pid"]]
    return KeyMap(image, reads, labels, ends)


def _sequences(found: dict[tuple[int, int], int]) -> list[tuple[int, int]]:
    """(batch, keys) once per sequence, from the streams."""
    seen: dict[int, int] = {}
    for (z, _), n in found.items():
        seen[z] = n
    return sorted(seen.items())


def wrong_only_where_split(ctx: CaseContext, mismatch: Any) -> str | None:
    """When an output of a decoding puzzle is wrong only for heads whose keys several programs read, and right for
    every head one program read whole: the cause is the merge of the splits, and the sentence says so."""
    log = log_of(ctx)
    q = ctx.inputs.get("q")
    if log is None or not isinstance(q, torch.Tensor) or q.dim() != 3 or mismatch.bad.dim() < 2:
        return None
    readers = key_readers(ctx, log)
    batch, heads = int(q.shape[0]), int(q.shape[1])
    kv_heads = max(1, len({y for _, y in readers}))
    group = max(1, heads // kv_heads)
    wrong = mismatch.bad.reshape(batch, heads, -1).any(-1)
    split = torch.zeros(batch, heads, dtype=torch.bool)
    for (z, y), programs in readers.items():
        if z < batch and len(programs) > 1:
            split[z, y * group : (y + 1) * group] = True
    whole = ~split
    if not bool(wrong.any()) or bool((wrong & whole).any()) or not bool(whole.any()):
        return None
    return (
        f"only the heads whose keys several programs read are wrong ({int(wrong.sum())} of {int(split.sum())} such "
        f"heads), and every head that one program read whole ({int(whole.sum())}) is right: the merge of the splits "
        "is wrong; look at the weight it gives each split, exp(m_i - m) of the split's max against the total max, "
        "and the sum it divides by"
    )
