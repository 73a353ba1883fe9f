"""Puzzle 13: decoding from a paged KV cache (grouped-query attention, sequences of different lengths).

A case gives B, H_kv, G, D, `page_size` and `seq_lens` (one length per sequence; `make bench`'s cases give
`N` instead, every sequence that long), and optionally `sm_scale`, `score_std`, `offset` and `lead` (as puzzle 11;
`lead` in each sequence, whose first key leads its others), `spare_pages` (pages no sequence uses; default B + 2)
and `table_spare` (entries of block_table past the longest sequence's pages; default 1, and 0 leaves that sequence's
row with none, as the contract allows: a page-number load past a sequence's pages then leaves the table).
Each sequence gets cdiv(seq_lens[b], page_size) pages drawn at random from the cache, so they are scattered and not in
increasing order; the rows of block_table are max_pages = (the longest sequence's pages) + table_spare long,
and the entries past a sequence's pages point to pages no sequence uses. Those pages, and the
slots of a sequence's last page past seq_lens[b], hold NaN: a kernel that reads them shows it.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from checks.memory import Arena
from checks.puzzles import BaselineFn, Expected, Work
from checks.puzzles.p09_flash_attention_v2_fwd import LEAD_KEY, lead_rows, offset_values, spread
from checks.puzzles.p11_flash_decoding import LSE_DIMS, O_DIMS, decoding_reference, kv_work, scale_of
from checks.registry import Case


def lengths(case: Case) -> list[int]:
    """The case's seq_lens, or B sequences of N keys."""
    return [int(n) for n in case.seq_lens] if case.seq_lens is not None else [int(case.N)] * int(case.B)


def page_layout(case: Case, generator: torch.Generator) -> tuple[torch.Tensor, int]:
    """(block_table (B, max_pages) int64, num_pages): every sequence's pages, then pages no sequence uses."""
    lens, size = lengths(case), int(case.page_size)
    used = [math.ceil(n / size) for n in lens]
    spare = int(len(lens) + 2 if case.spare_pages is None else case.spare_pages)
    table_spare = 1 if case.table_spare is None else int(case.table_spare)
    num_pages, max_pages = sum(used) + spare, max(1, max(used) + table_spare)
    device = generator.device  # a generator draws only on its own device (the GPU's, on a GPU)
    order = torch.randperm(num_pages, generator=generator, device=device).cpu()
    free = order[sum(used) :]  # the pages no sequence uses
    table = free[torch.randint(spare, (len(lens), max_pages), generator=generator, device=device).cpu()]
    start = 0
    for b, count in enumerate(used):
        table[b, :count] = order[start : start + count]
        start += count
    return table, num_pages


def make_inputs(case: Case, arena: Arena) -> dict[str, Any]:
    b, h_kv, d, size = case.B, case.H_kv, case.D, int(case.page_size)
    lens = torch.tensor(lengths(case))
    assert len(lens) == b, "a case gives one length per sequence"
    table, num_pages = page_layout(case, arena.generator)
    q = arena.randn((b, case.G * h_kv, d), torch.float16, "q", spread(case, "q"))
    live = torch.zeros(num_pages, size, dtype=torch.bool)
    for z in range(b):
        for j in range(math.ceil(int(lens[z]) / size)):
            live[table[z, j], : min(size, int(lens[z]) - j * size)] = True
    inputs: dict[str, Any] = {"q": q}
    for name in ("k_cache", "v_cache"):
        cache = arena.randn((num_pages, size, h_kv, d), torch.float16, name, spread(case, name))
        cache[~live.to(cache.device)] = float("nan")  # slots no sequence uses: reading them shows
        inputs[name] = cache
    offset_values(inputs["v_cache"], case)
    if case.lead:
        lead_first_keys(inputs, case, table, live)
    inputs["block_table"] = arena.integers(table.to(arena.device), "block_table")
    inputs["seq_lens"] = arena.integers(lens.to(arena.device), "seq_lens")
    inputs["sm_scale"] = scale_of(case)
    return inputs


def lead_first_keys(inputs: dict[str, Any], case: Case, table: torch.Tensor, live: torch.Tensor) -> None:
    """Puzzle 9's `lead`, in place: each sequence's first key (slot 0 of its first page) leads its other keys in the
    odd query heads' scores; the slots no sequence uses stay NaN."""
    keys = inputs["k_cache"][..., 0]  # (num_pages, page_size, H_kv)
    keys[live.to(keys.device)] = -LEAD_KEY
    keys[table[:, 0].to(keys.device), 0] = 0.0
    lead_rows(inputs["q"], case)  # q (B, H_q, D): its rows are the query heads


def gather(cache: torch.Tensor, table: torch.Tensor, n: int) -> torch.Tensor:
    """The first n keys (or values) of one sequence, (H_kv, n, D), in order."""
    size = cache.shape[1]
    j = torch.arange(n, device=cache.device)
    return cache[table[j // size].long(), j % size].transpose(0, 1)


def reference(inputs: dict[str, Any]) -> list[Expected]:
    q, kc, vc = inputs["q"], inputs["k_cache"], inputs["v_cache"]
    table, lens = inputs["block_table"], inputs["seq_lens"].tolist()
    outs, lses = [], []
    for b, n in enumerate(lens):
        o, lse = decoding_reference(q[b : b + 1], gather(kc, table[b], n)[None], gather(vc, table[b], n)[None],
                                    inputs["sm_scale"])  # fmt: skip
        outs.append(o)
        lses.append(lse)
    return [Expected("o", torch.cat(outs), torch.float16, O_DIMS),
            Expected("lse", torch.cat(lses), torch.float32, LSE_DIMS)]  # fmt: skip


def gathered_sdpa(inputs: dict[str, Any], **kwargs: Any) -> BaselineFn:
    """The naive way: copy every sequence's pages into a (B, H_kv, max_len, D) tensor, then SDPA with a length mask."""
    q, kc, vc, table, lens = (inputs[k] for k in ("q", "k_cache", "v_cache", "block_table", "seq_lens"))
    size = kc.shape[1]
    max_len = table.shape[1] * size
    j = torch.arange(max_len, device=q.device)
    pages = table[:, j // size].long()  # (B, max_len)
    keep = j[None, :] < lens[:, None]  # (B, max_len)

    def call() -> torch.Tensor:
        k = kc[pages, j % size].transpose(1, 2)  # (B, H_kv, max_len, D)
        v = vc[pages, j % size].transpose(1, 2)
        k = torch.where(keep[:, None, :, None], k, 0)  # slots past seq_lens may hold anything
        v = torch.where(keep[:, None, :, None], v, 0)
        return torch.nn.functional.scaled_dot_product_attention(
            q.unsqueeze(2), k, v, attn_mask=keep[:, None, None, :], scale=inputs["sm_scale"], enable_gqa=True
        ).squeeze(2)

    return call


def baseline(inputs: dict[str, Any]) -> BaselineFn:
    return gathered_sdpa(inputs)


def work(inputs: dict[str, Any]) -> Work:
    _, _, h_kv, d = inputs["k_cache"].shape
    return kv_work(int(inputs["seq_lens"].sum()), d, h_kv, inputs["k_cache"].element_size())
