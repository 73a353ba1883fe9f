"""Each puzzle's inputs at the largest sizes its contract names (`largest:` in puzzles.yaml), without their storage.

The data (every float tensor) is made on torch's meta device: shapes, strides and dtypes, and no memory, so that a
KV cache of 2^32 elements costs nothing; a case's `layout` keys lay it out as its graded cases do (a weight
transposed, say). What the host function and the kernels read by value is real and small, on
the grading device: a paged cache's `block_table`, `seq_lens`, `cu_seqlens`, `context_lens`. The first sequence's
pages are the last ones of the cache, so that the offsets a kernel computes reach the cache's far end.
`checks.engine.record.largest` records the learner's plan on these inputs, and `checks.engine.replay.overflow` runs
the programs at the ends of its grids on them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from checks.memory import base_shape, layout_view
from checks.registry import Case, Puzzle

META = "meta"


def data(shape: tuple[int, ...], dtype: torch.dtype = torch.float16) -> torch.Tensor:
    """A contiguous tensor of this shape with no storage behind it."""
    return torch.empty(shape, dtype=dtype, device=META)


def laid_out(case: Case, name: str, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """A tensor of this shape without storage, in the layout the case gives `name` (a view, as the graded cases'
    `checks.memory.layout_view` makes it)."""
    layout = case.layout_of(name)
    return layout_view(data(base_shape(shape, layout), dtype), layout)


def vector_add(case: Case, device: str) -> dict[str, Any]:
    """1: x, y (n,) float32."""
    return {"x": data((int(case.n),), torch.float32), "y": data((int(case.n),), torch.float32)}


def matrix_add(case: Case, device: str) -> dict[str, Any]:
    """2: a, b (M, N) float32, each in its layout."""
    shape = tuple(int(s) for s in case.shape)
    return {"a": laid_out(case, "a", shape, torch.float32), "b": laid_out(case, "b", shape, torch.float32)}


def matmul(case: Case, device: str) -> dict[str, Any]:
    """3, 4: a (M, K), b (K, N) float16, each in its layout."""
    m, n, k = int(case.M), int(case.N), int(case.K)
    return {"a": laid_out(case, "a", (m, k), torch.float16), "b": laid_out(case, "b", (k, n), torch.float16)}


def softmax(case: Case, device: str) -> dict[str, Any]:
    """5, 6, 7: x (M, N) float32."""
    return {"x": laid_out(case, "x", tuple(int(s) for s in case.shape), torch.float32)}


def softmax_backward(case: Case, device: str) -> dict[str, Any]:
    """10a: y, dy (M, N) float32."""
    shape = tuple(int(s) for s in case.shape)
    return {"y": laid_out(case, "y", shape, torch.float32), "dy": laid_out(case, "dy", shape, torch.float32)}


def scale(case: Case) -> float:
    return float(case.sm_scale or 1.0 / math.sqrt(int(case.D)))


def heads(case: Case) -> tuple[int, int]:
    """(query heads, kv heads): H for both, or G·H_kv and H_kv."""
    if case.H_kv is None:
        return int(case.H), int(case.H)
    return int(case.G or 1) * int(case.H_kv), int(case.H_kv)


def attention(case: Case, device: str) -> dict[str, Any]:
    """q, k, v (B, H, N, D) float16, then `causal` where the case gives it, and sm_scale: 8a, 8, 9a, 9."""
    shape = (int(case.B), int(case.H), int(case.N), int(case.D))
    inputs: dict[str, Any] = {"q": data(shape), "k": data(shape), "v": data(shape)}
    if case.causal is not None:
        inputs["causal"] = bool(case.causal)
    return {**inputs, "sm_scale": scale(case)}


def attention_backward(case: Case, device: str) -> dict[str, Any]:
    """q, k, v, o (B, H, N, D) float16, lse (B, H, N) float32, do, causal, sm_scale: 10b, 10."""
    shape = (int(case.B), int(case.H), int(case.N), int(case.D))
    q, k, v, o = data(shape), data(shape), data(shape), data(shape)
    lse = data(shape[:3], torch.float32)
    return {"q": q, "k": k, "v": v, "o": o, "lse": lse, "do": data(shape), "causal": bool(case.causal),
            "sm_scale": scale(case)}  # fmt: skip


def decoding(case: Case, device: str) -> dict[str, Any]:
    """q (B, H_q, D); k, v (B, H_kv, N, D); sm_scale: 11, 12."""
    h_q, h_kv = heads(case)
    b, n, d = int(case.B), int(case.N), int(case.D)
    return {"q": data((b, h_q, d)), "k": data((b, h_kv, n, d)), "v": data((b, h_kv, n, d)), "sm_scale": scale(case)}


def paged_layout(case: Case) -> tuple[int, int]:
    """(num_pages, max_pages) of a paged cache: B sequences of up to `context` (13: N) tokens fill it."""
    page_size = int(case.page_size)
    max_pages = math.ceil(int(case.context if case.context is not None else case.N) / page_size)
    return int(case.B) * max_pages, max_pages


def block_table(case: Case, device: str) -> torch.Tensor:
    """(B, max_pages) int32: sequence b's pages counted down from the end of the cache, so that the first sequence
    reads the last pages and every page of the cache is listed once."""
    num_pages, max_pages = paged_layout(case)
    table = num_pages - 1 - torch.arange(num_pages, dtype=torch.int64).reshape(int(case.B), max_pages)
    return table.to(torch.int32).to(device)


def cache(case: Case) -> torch.Tensor:
    num_pages, _ = paged_layout(case)
    return data((num_pages, int(case.page_size), heads(case)[1], int(case.D)))


def paged_decoding(case: Case, device: str) -> dict[str, Any]:
    """13: q (B, H_q, D); k_cache, v_cache (num_pages, page_size, H_kv, D); block_table; seq_lens, every sequence as
    long as its row of block_table allows; sm_scale."""
    b, d = int(case.B), int(case.D)
    return {
        "q": data((b, heads(case)[0], d)),
        "k_cache": cache(case),
        "v_cache": cache(case),
        "block_table": block_table(case, device),
        "seq_lens": torch.full((b,), int(case.N), dtype=torch.int32, device=device),
        "sm_scale": scale(case),
    }


def packed(case: Case, device: str) -> tuple[dict[str, Any], torch.Tensor]:
    """B sequences of N new tokens each, packed: q (T, H_q, D), k, v (T, H_kv, D); and cu_seqlens (B + 1,) int32."""
    h_q, h_kv = heads(case)
    b, n, d = int(case.B), int(case.N), int(case.D)
    tokens = {"q": data((b * n, h_q, d)), "k": data((b * n, h_kv, d)), "v": data((b * n, h_kv, d))}
    return tokens, (torch.arange(b + 1, dtype=torch.int32) * n).to(device)


def varlen_attention(case: Case, device: str) -> dict[str, Any]:
    """14: the packed tokens, cu_seqlens, max_seqlen, causal, sm_scale."""
    tokens, cu_seqlens = packed(case, device)
    return {**tokens, "cu_seqlens": cu_seqlens, "max_seqlen": int(case.N), "causal": bool(case.causal),
            "sm_scale": scale(case)}  # fmt: skip


def chunked_prefill(case: Case, device: str) -> dict[str, Any]:
    """15: the packed new tokens, the paged cache of each sequence's `context` earlier tokens, block_table,
    cu_seqlens, context_lens, sm_scale."""
    tokens, cu_seqlens = packed(case, device)
    contexts = torch.full((int(case.B),), int(case.context), dtype=torch.int32, device=device)
    return {**tokens, "k_cache": cache(case), "v_cache": cache(case), "block_table": block_table(case, device),
            "cu_seqlens": cu_seqlens, "context_lens": contexts, "sm_scale": scale(case)}  # fmt: skip


MAKERS: dict[str, Callable[[Case, str], dict[str, Any]]] = {
    "vector_add": vector_add,
    "matrix_add": matrix_add,
    "matmul": matmul,
    "matmul_fast": matmul,
    "softmax": softmax,
    "softmax_blocked": softmax,
    "softmax_online": softmax,
    "softmax_backward": softmax_backward,
    "attention_one_block": attention,
    "flash_attention_v1": attention,
    "flash_attention_v2_fwd_noncausal": attention,
    "flash_attention_v2_fwd": attention,
    "flash_attention_v2_bwd_dkdv": attention_backward,
    "flash_attention_v2_bwd": attention_backward,
    "flash_decoding": decoding,
    "gqa_decoding": decoding,
    "paged_decoding": paged_decoding,
    "varlen_attention": varlen_attention,
    "chunked_prefill": chunked_prefill,
}


def largest_inputs(puzzle: Puzzle, device: str) -> dict[str, Any] | None:
    """The arguments of the puzzle's function at its largest sizes, in order; None for a puzzle without them."""
    maker = MAKERS.get(puzzle.slug)
    if maker is None or puzzle.largest is None:
        return None
    return maker(puzzle.largest, device)


def elements(inputs: dict[str, Any]) -> dict[str, int]:
    """name -> elements of each tensor input: what the report says of the sizes."""
    return {name: t.numel() for name, t in inputs.items() if isinstance(t, torch.Tensor)}
