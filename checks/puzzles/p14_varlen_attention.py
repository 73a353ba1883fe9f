"""Puzzle 14: attention over sequences of different lengths packed into one tensor (FlashAttention's varlen form).

A case gives H_kv, G, D and `seq_lens` (one length per sequence, 0 allowed, at least one token in all; `make bench`'s
cases give `B` and `N` instead, every sequence that long), and optionally `causal` (default false), `sm_scale`
(default 1/sqrt(D)), `score_std`, `offset` and `lead` (as puzzle 9; `lead` in each sequence) and `layout` (or
`layout_q`, `layout_k`, `layout_v`): "contiguous", or "sliced", a (T, H, D) view of a buffer with one more head per
token, whose elements outside the view hold the guard bands' poison (NaN), as q, k and v are views of one projection's
output in a real model.

The sequences are packed along the first dimension: sequence b is tokens cu_seqlens[b] to cu_seqlens[b + 1] - 1 of
q, k and v, and attends only to its own tokens (causal: token i of a sequence to its tokens 0..i).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from checks.memory import Arena
from checks.puzzles import BaselineFn, Expected, Work
from checks.puzzles.p09_flash_attention_v2_fwd import lead_first_key, offset_values, spread
from checks.registry import Case

O_DIMS = ("tokens", "heads", "head-dim columns")
LSE_DIMS = ("heads", "tokens")


def lengths(case: Case) -> list[int]:
    """The case's seq_lens, or B sequences of N tokens."""
    return [int(n) for n in case.seq_lens] if case.seq_lens is not None else [int(case.N)] * int(case.B)


def scale_of(case: Case) -> float:
    return float(case.sm_scale or 1.0 / math.sqrt(case.D))


HEAD_GAP = 8  # elements between two heads of a "sliced" input (a multiple of 8: rows stay 16-byte aligned)


def packed(arena: Arena, tokens: int, heads: int, d: int, label: str, layout: str, scale: float) -> torch.Tensor:
    """A (tokens, heads, D) float16 input: contiguous, or ("sliced") a view whose heads are D + 8 apart and whose rows
    are heads + 1 of those apart, the gaps and the head past the view holding the guard bands' poison: a kernel that
    takes the head stride for D, or the row stride for heads * D, reads poison."""
    if layout == "contiguous":
        return arena.randn((tokens, heads, d), torch.float16, label, scale)
    head_stride = d + HEAD_GAP
    view = arena.view((tokens, heads, d), ((heads + 1) * head_stride, head_stride, 1), torch.float16, "input", label)
    gen = arena.data_generator or arena.generator
    values = torch.randn((tokens, heads, d), generator=gen, device=arena.device, dtype=torch.float32) * scale
    view.copy_(values.to(torch.float16))
    return view


def make_inputs(case: Case, arena: Arena) -> dict[str, Any]:
    lens = lengths(case)
    total, h_kv, d = sum(lens), int(case.H_kv), int(case.D)
    assert total >= 1, "a case packs at least one token"
    heads = {"q": int(case.G) * h_kv, "k": h_kv, "v": h_kv}
    inputs: dict[str, Any] = {
        name: packed(arena, total, h, d, name, case.layout_of(name), spread(case, name)) for name, h in heads.items()
    }
    offset_values(inputs["v"], case)
    cu = torch.tensor([0, *lens]).cumsum(0)
    for start, end in zip(cu[:-1].tolist(), cu[1:].tolist(), strict=True):  # each sequence's own first key leads
        if end > start:
            lead_first_key(inputs["q"][start:end].transpose(0, 1), inputs["k"][start:end].transpose(0, 1), case)
    inputs["cu_seqlens"] = arena.integers(cu.to(arena.device), "cu_seqlens")
    inputs["max_seqlen"] = max(lens)
    inputs["causal"] = bool(case.causal)
    inputs["sm_scale"] = scale_of(case)
    return inputs


def sequence_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, sm_scale: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """(o (n, H_q, D), lse (H_q, n)) of one sequence's q (n, H_q, D) against its k, v (n_k, H_kv, D), in float64 on the
    CPU and float32 on a GPU. Causal aligns the queries with the last n keys: query i sees keys 0..n_k - n + i."""
    wide = torch.float64 if q.device.type == "cpu" else torch.float32
    n, n_k, group = q.shape[0], k.shape[0], q.shape[1] // k.shape[1]
    kw = k.to(wide).repeat_interleave(group, dim=1)  # (n_k, H_q, D)
    vw = v.to(wide).repeat_interleave(group, dim=1)
    s = torch.einsum("qhd,khd->hqk", q.to(wide), kw) * sm_scale  # (H_q, n, n_k)
    if causal:
        future = torch.ones(n, n_k, dtype=torch.bool, device=q.device).triu(n_k - n + 1)  # key j > n_k - n + i
        s = s.masked_fill(future, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)  # (H_q, n)
    o = torch.einsum("hqk,khd->qhd", torch.exp(s - lse[..., None]), vw)  # (n, H_q, D)
    return o, lse


def reference(inputs: dict[str, Any]) -> list[Expected]:
    q, k, v, cu = inputs["q"], inputs["k"], inputs["v"], inputs["cu_seqlens"].tolist()
    wide = torch.float64 if q.device.type == "cpu" else torch.float32
    o = torch.zeros(q.shape, dtype=wide, device=q.device)
    lse = torch.zeros((q.shape[1], q.shape[0]), dtype=wide, device=q.device)
    for start, end in zip(cu[:-1], cu[1:], strict=True):
        if end > start:
            o[start:end], lse[:, start:end] = sequence_attention(
                q[start:end], k[start:end], v[start:end], inputs["causal"], inputs["sm_scale"]
            )
    return [Expected("o", o, torch.float16, O_DIMS, contiguous=True), Expected("lse", lse, torch.float32, LSE_DIMS)]


def padded_sdpa(inputs: dict[str, Any]) -> BaselineFn:
    """The naive way: copy the sequences into (B, H, max_seqlen, D) tensors padded with zeros, SDPA with a mask of the
    real keys (and the causal one), then gather the real tokens' rows back."""
    q, k, v, cu = inputs["q"], inputs["k"], inputs["v"], inputs["cu_seqlens"].long()
    longest, causal, scale = int(inputs["max_seqlen"]), inputs["causal"], inputs["sm_scale"]
    lens = cu[1:] - cu[:-1]
    j = torch.arange(longest, device=q.device)
    real = j[None, :] < lens[:, None]  # (B, max_seqlen)
    token = (cu[:-1, None] + j[None, :]).clamp(max=q.shape[0] - 1)  # (B, max_seqlen): padding reads some token
    mask = real[:, None, None, :]  # (B, 1, 1, max_seqlen): the keys of the sequence
    if causal:
        mask = mask & (j[None, :] <= j[:, None])[None, None]  # (B, 1, max_seqlen, max_seqlen)

    def call() -> torch.Tensor:
        pad = [torch.where(real[..., None, None], x[token], 0).transpose(1, 2) for x in (q, k, v)]  # (B, H, max, D)
        o = torch.nn.functional.scaled_dot_product_attention(*pad, attn_mask=mask, scale=scale, enable_gqa=True)
        return o.transpose(1, 2)[real]  # (T, H_q, D)

    return call


def torch_varlen(inputs: dict[str, Any]) -> BaselineFn | None:
    """torch.nn.attention.varlen.varlen_attn (FlashAttention's varlen kernel), where this torch has it and it runs
    these inputs; None otherwise. Its signature changed between versions (is_causal, then window_size and scale)."""
    try:
        from torch.nn.attention.varlen import varlen_attn
    except ImportError:
        return None
    q, k, v, cu = inputs["q"], inputs["k"], inputs["v"], inputs["cu_seqlens"]
    longest, causal, scale = int(inputs["max_seqlen"]), inputs["causal"], inputs["sm_scale"]
    group = q.shape[1] // k.shape[1]
    tries = [
        dict(scale=scale, window_size=(-1, 0) if causal else (-1, -1), enable_gqa=True),
        dict(scale=scale, window_size=(-1, 0) if causal else (-1, -1)),
        dict(is_causal=causal),  # the first version: no scale, which then must be 1/sqrt(D)
    ]
    for kwargs in tries:
        keys, values = (k, v)
        if not kwargs.get("enable_gqa"):
            keys, values = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)

        def call(kwargs: dict[str, Any] = kwargs, keys: torch.Tensor = keys, values: torch.Tensor = values) -> Any:
            return varlen_attn(q, keys, values, cu, cu, longest, longest, **kwargs)

        if "is_causal" in kwargs and abs(scale - 1 / math.sqrt(q.shape[-1])) > 1e-9:
            continue
        try:
            call()
        except (TypeError, RuntimeError, ValueError):
            continue
        return call
    return None


def baseline(inputs: dict[str, Any]) -> BaselineFn:
    return padded_sdpa(inputs)


def baselines(inputs: dict[str, Any]) -> dict[str, BaselineFn]:
    found = torch_varlen(inputs)
    return {"varlen_attn": found} if found is not None else {}


def work(inputs: dict[str, Any]) -> Work:
    """Two (n, n, D) products per query head of each sequence (half when causal), reading q, k, v and writing o."""
    q, k, cu = inputs["q"], inputs["k"], inputs["cu_seqlens"].tolist()
    heads, d = q.shape[1], q.shape[2]
    pairs = sum((b - a) * (b - a) for a, b in zip(cu[:-1], cu[1:], strict=True))
    flops = 2 * 2.0 * heads * pairs * d / (2 if inputs["causal"] else 1)
    moved = (2 * q[0].numel() + 2 * k[0].numel()) * q.shape[0] * q.element_size()
    return Work(bytes=float(moved), flops=flops)
