"""Puzzle 15: chunked prefill, new tokens packed as in puzzle 14, against their sequences' earlier tokens in pages.

A case gives H_kv, G, D, `page_size`, `seq_lens` (each sequence's new tokens, 0 allowed, at least one in all) and
`context_lens` (each sequence's cached tokens, 0 allowed), and optionally `sm_scale`, `score_std`, `offset`, `lead`,
`spare_pages` (as puzzle 13) and `layout` (or `layout_q`, `layout_k`, `layout_v`) for the new tokens' q, k and v (as
puzzle 14). `make bench`'s cases give `B`, `N` (new tokens) and `context` (cached tokens) instead, the same for every
sequence.

The cache is puzzle 13's: each sequence's cdiv(context_lens[b], page_size) pages drawn at random, the entries of
block_table past them naming pages no sequence uses, which hold NaN, as do the slots of a last page past
context_lens[b]. New token i of sequence b sees the sequence's context_lens[b] cached tokens and its new tokens 0..i
(causal, aligned bottom-right).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import torch

from checks.memory import Arena
from checks.puzzles import BaselineFn, Expected, Work
from checks.puzzles.p09_flash_attention_v2_fwd import LEAD_KEY, lead_rows, offset_values, spread
from checks.puzzles.p13_paged_decoding import gather, page_layout
from checks.puzzles.p14_varlen_attention import LSE_DIMS, O_DIMS, packed, scale_of, sequence_attention
from checks.registry import Case


def lengths(case: Case) -> tuple[list[int], list[int]]:
    """(new tokens, cached tokens) of each sequence: the case's seq_lens and context_lens, or B sequences of N new
    tokens after `context` cached ones."""
    if case.seq_lens is not None:
        new = [int(n) for n in case.seq_lens]
        return new, [int(n) for n in (case.context_lens or [0] * len(new))]
    return [int(case.N)] * int(case.B), [int(case.context or 0)] * int(case.B)


def make_inputs(case: Case, arena: Arena) -> dict[str, Any]:
    new, contexts = lengths(case)
    assert len(new) == len(contexts), "a case gives one context length per sequence"
    total, h_kv, d, size = sum(new), int(case.H_kv), int(case.D), int(case.page_size)
    assert total >= 1, "a case packs at least one new token"
    heads = {"q": int(case.G) * h_kv, "k": h_kv, "v": h_kv}
    inputs: dict[str, Any] = {
        name: packed(arena, total, h, d, name, case.layout_of(name), spread(case, name)) for name, h in heads.items()
    }
    table, num_pages = page_layout(replace(case, seq_lens=tuple(contexts)), arena.generator)
    live = torch.zeros(num_pages, size, dtype=torch.bool)
    for b, n in enumerate(contexts):
        for j in range(math.ceil(n / size)):
            live[table[b, j], : min(size, n - j * size)] = True
    for name in ("k_cache", "v_cache"):
        cache = arena.randn((num_pages, size, h_kv, d), torch.float16, name, spread(case, name))
        cache[~live.to(cache.device)] = float("nan")  # slots no sequence's context uses: reading them shows
        inputs[name] = cache
    for name in ("v", "v_cache"):  # the cached values and the new ones
        offset_values(inputs[name], case)
    if case.lead:
        lead_first_keys(inputs, case, table, live, new, contexts)
    inputs["block_table"] = arena.integers(table.to(arena.device), "block_table")
    inputs["cu_seqlens"] = arena.integers(torch.tensor([0, *new]).cumsum(0).to(arena.device), "cu_seqlens")
    inputs["context_lens"] = arena.integers(torch.tensor(contexts).to(arena.device), "context_lens")
    inputs["sm_scale"] = scale_of(case)
    return inputs


def lead_first_keys(
    inputs: dict[str, Any], case: Case, table: torch.Tensor, live: torch.Tensor, new: list[int], contexts: list[int]
) -> None:
    """Puzzle 9's `lead` for each sequence, in place: its first key (the first cached one, or the first new one where
    it has no context) leads its other keys, cached and new, in its odd new tokens' scores."""
    for name in ("k", "k_cache"):
        keys = inputs[name][..., 0]
        keys[live.to(keys.device) if name == "k_cache" else slice(None)] = -LEAD_KEY  # the unused slots stay NaN
    start = 0
    for b, (n, context) in enumerate(zip(new, contexts, strict=True)):
        if context:
            inputs["k_cache"][int(table[b, 0]), 0, :, 0] = 0.0
        elif n:
            inputs["k"][start, :, 0] = 0.0
        if n:
            lead_rows(inputs["q"][start : start + n].transpose(0, 1), case)
        start += n


def reference(inputs: dict[str, Any]) -> list[Expected]:
    q, k, v, cu = inputs["q"], inputs["k"], inputs["v"], inputs["cu_seqlens"].tolist()
    kc, vc, table, contexts = inputs["k_cache"], inputs["v_cache"], inputs["block_table"], inputs["context_lens"]
    wide = torch.float64 if q.device.type == "cpu" else torch.float32
    o = torch.zeros(q.shape, dtype=wide, device=q.device)
    lse = torch.zeros((q.shape[1], q.shape[0]), dtype=wide, device=q.device)
    for b, (start, end) in enumerate(zip(cu[:-1], cu[1:], strict=True)):
        if end == start:
            continue
        n = int(contexts[b])
        keys = torch.cat([gather(kc, table[b], n).transpose(0, 1), k[start:end]])  # (context + new, H_kv, D)
        values = torch.cat([gather(vc, table[b], n).transpose(0, 1), v[start:end]])
        o[start:end], lse[:, start:end] = sequence_attention(q[start:end], keys, values, True, inputs["sm_scale"])
    return [Expected("o", o, torch.float16, O_DIMS, contiguous=True), Expected("lse", lse, torch.float32, LSE_DIMS)]


def gathered_sdpa(inputs: dict[str, Any]) -> BaselineFn:
    """The naive way: copy each sequence's cached pages and new keys into (B, H_kv, longest, D) tensors, its new
    queries into (B, H_q, most new, D), SDPA with a mask of the real keys, causal aligned bottom-right, then gather the
    real tokens' rows back."""
    q, k, v, cu = inputs["q"], inputs["k"], inputs["v"], inputs["cu_seqlens"].long()
    kc, vc, table, contexts = inputs["k_cache"], inputs["v_cache"], inputs["block_table"], inputs["context_lens"].long()
    size, scale = kc.shape[1], inputs["sm_scale"]
    new = cu[1:] - cu[:-1]
    width, rows = int((contexts + new).max()), int(new.max())
    j = torch.arange(width, device=q.device)
    cached = j[None, :] < contexts[:, None]  # (B, width): key j of sequence b is in the cache
    real = j[None, :] < (contexts + new)[:, None]
    page = table.long().gather(1, (j // size).clamp(max=table.shape[1] - 1).expand(len(new), -1))
    token = (cu[:-1, None] + j[None, :] - contexts[:, None]).clamp(0, q.shape[0] - 1)  # a new key's packed token
    i = torch.arange(rows, device=q.device)
    real_q = i[None, :] < new[:, None]  # (B, rows)
    token_q = (cu[:-1, None] + i[None, :]).clamp(max=q.shape[0] - 1)
    mask = real[:, None, None, :] & (j[None, None, :] <= (contexts[:, None, None] + i[None, :, None]))[:, None]

    def call() -> torch.Tensor:
        keys, values = (
            torch.where(
                real[..., None, None], torch.where(cached[..., None, None], c[page, j % size], x[token]), 0
            ).transpose(1, 2)
            for c, x in ((kc, k), (vc, v))
        )  # (B, H_kv, width, D)
        queries = torch.where(real_q[..., None, None], q[token_q], 0).transpose(1, 2)  # (B, H_q, rows, D)
        o = torch.nn.functional.scaled_dot_product_attention(
            queries, keys, values, attn_mask=mask, scale=scale, enable_gqa=True
        )
        return o.transpose(1, 2)[real_q]  # (T, H_q, D)

    return call


def baseline(inputs: dict[str, Any]) -> BaselineFn:
    return gathered_sdpa(inputs)


def work(inputs: dict[str, Any]) -> Work:
    """Two products per query head of each new token against its context and the new tokens up to it; reading q, the
    new k and v, the contexts' K and V, and writing o."""
    q, k, cu = inputs["q"], inputs["k"], inputs["cu_seqlens"].tolist()
    contexts = inputs["context_lens"].tolist()
    heads, d = q.shape[1], q.shape[2]
    pairs = sum((b - a) * c + (b - a) * (b - a + 1) / 2 for a, b, c in zip(cu[:-1], cu[1:], contexts, strict=True))
    token_bytes = (2 * q[0].numel() + 2 * k[0].numel()) * q.element_size()
    cached = 2 * sum(contexts) * k[0].numel() * k.element_size()
    return Work(bytes=float(q.shape[0] * token_bytes + cached), flops=2 * 2.0 * heads * pairs * d)
