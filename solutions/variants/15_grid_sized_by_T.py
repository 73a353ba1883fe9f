"""Puzzle 15, another design: the grid sized by T, (cdiv(T, tokens per block), B, H_kv), as puzzle 14's grid.

Not a puzzle: `make bench` times it beside the answer key (solutions/15_chunked_prefill.py), as a `variants` entry
of puzzle 15's bench entry in puzzles.yaml. It defines the same function as the answer key and passes the same
grader: `python -m checks 15 --file solutions/variants/15_grid_sized_by_T.py`.

There is no max_seqlen, and no sequence has more than T new tokens, so a grid with a program for every block of T
tokens of every sequence covers them all; with many sequences most of its programs return at once. The answer key's
flat grid starts one program per block and at most one more per sequence, and finds its sequence by a search.
One loop per kind of key, each masked in every block (the answer key masks only the blocks that need it).
"""

import torch
import triton
import triton.language as tl

LN2 = tl.constexpr(0.6931471805599453)  # ln(2): turns a base-2 logarithm into a natural one


def cdiv(a: int, b: int) -> int:
    """⌈a / b⌉ in plain Python."""
    return -(-a // b)


def launch_shape(head_dim: int, device: torch.device) -> tuple[int, int, int, int]:
    """(BLOCK_M rows of queries, BLOCK_N keys, num_warps, num_stages), as puzzle 14's key."""
    if device.type != "cuda":
        return 64, 32, 4, 1
    return (128, 64, 8, 2) if head_dim <= 64 else (128, 32, 8, 2)


@triton.jit
def _online_softmax_step(q, k, v, allowed, m_i, l_i, acc, qk_scale):
    """Puzzle 9's update of (m_i, l_i, acc) by one block of keys k and values v, where `allowed` is True."""
    qk = tl.dot(q, tl.trans(k)) * qk_scale
    qk = tl.where(allowed, qk, float("-inf"))
    m_ij = tl.maximum(m_i, tl.max(qk, 1))  # finite: the first block of keys holds an allowed key for every row
    p = tl.math.exp2(qk - m_ij[:, None])
    alpha = tl.math.exp2(m_i - m_ij)
    acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
    return m_ij, l_i * alpha + tl.sum(p, 1), acc


@triton.jit
def _chunked_prefill_fwd(
    q_ptr, k_ptr, v_ptr,  # the new tokens: q (T, H_q, D); k, v (T, H_kv, D), any strides
    k_cache_ptr, v_cache_ptr,  # the contexts: (num_pages, PAGE_SIZE, H_kv, D)
    block_table_ptr, cu_seqlens_ptr, context_lens_ptr,  # (B, max_pages), (B + 1,) and (B,) int32
    o_ptr, lse_ptr,  # o: (T, H_q, D) contiguous; lse: (H_q, T) float32 contiguous
    qk_scale,  # sm_scale * log2(e)
    stride_qt, stride_qh, stride_qk,
    stride_kt, stride_kh, stride_kk,
    stride_vt, stride_vh, stride_vk,
    stride_kp, stride_ks, stride_kch, stride_kck,  # page, slot, kv head, column
    stride_vp, stride_vs, stride_vch, stride_vck,
    stride_bt,  # one row of block_table
    T,  # new tokens in all
    PAGE_SIZE: tl.constexpr,
    GROUP: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,  # rows of the query tile: BLOCK_M // GROUP tokens, each with its G heads
    BLOCK_N: tl.constexpr,
):
    block = tl.program_id(0)
    seq = tl.program_id(1)
    off_h = tl.program_id(2)  # which kv head
    start = tl.load(cu_seqlens_ptr + seq)
    seq_len = tl.load(cu_seqlens_ptr + seq + 1) - start
    TOKENS: tl.constexpr = BLOCK_M // GROUP
    if block * TOKENS < seq_len:  # query blocks past the end of this sequence's new tokens have nothing to do
        context = tl.load(context_lens_ptr + seq)
        offs_r = tl.arange(0, BLOCK_M)
        offs_m = block * TOKENS + offs_r // GROUP  # each row's new token, inside the sequence
        head = off_h * GROUP + offs_r % GROUP  # each row's query head
        offs_d = tl.arange(0, HEAD_DIM)
        mask_m = offs_m < seq_len
        rows = (start + offs_m).to(tl.int64)
        q = tl.load(q_ptr + rows[:, None] * stride_qt + head[:, None] * stride_qh + offs_d[None, :] * stride_qk,
                    mask=mask_m[:, None], other=0.0)  # (BLOCK_M, HEAD_DIM)
        m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
        l_i = tl.zeros((BLOCK_M,), tl.float32)
        acc = tl.zeros((BLOCK_M, HEAD_DIM), tl.float32)
        # -- the context, from the pages block_table lists: every new token sees all of it
        for start_n in range(0, context, BLOCK_N):
            offs_n = start_n + tl.arange(0, BLOCK_N)
            mask_n = offs_n < context
            page = tl.load(block_table_ptr + seq * stride_bt + offs_n // PAGE_SIZE, mask=mask_n, other=0).to(tl.int64)
            slot = offs_n % PAGE_SIZE
            k = tl.load(k_cache_ptr + (page * stride_kp + slot * stride_ks + off_h * stride_kch)[:, None]
                        + offs_d[None, :] * stride_kck, mask=mask_n[:, None], other=0.0)
            v = tl.load(v_cache_ptr + (page * stride_vp + slot * stride_vs + off_h * stride_vch)[:, None]
                        + offs_d[None, :] * stride_vck, mask=mask_n[:, None], other=0.0)
            m_i, l_i, acc = _online_softmax_step(q, k, v, mask_n[None, :], m_i, l_i, acc, qk_scale)
        # -- the new tokens, packed: causal, up to the block's last query
        hi = tl.minimum(seq_len, (block + 1) * TOKENS)
        for start_n in range(0, hi, BLOCK_N):
            offs_n = start_n + tl.arange(0, BLOCK_N)
            mask_n = offs_n < hi
            cols = (start + offs_n).to(tl.int64)
            k = tl.load(k_ptr + cols[:, None] * stride_kt + off_h * stride_kh + offs_d[None, :] * stride_kk,
                        mask=mask_n[:, None], other=0.0)
            v = tl.load(v_ptr + cols[:, None] * stride_vt + off_h * stride_vh + offs_d[None, :] * stride_vk,
                        mask=mask_n[:, None], other=0.0)
            allowed = mask_n[None, :] & (offs_n[None, :] <= offs_m[:, None])
            m_i, l_i, acc = _online_softmax_step(q, k, v, allowed, m_i, l_i, acc, qk_scale)
        o_rows = rows * (GROUP * tl.num_programs(2)) + head  # row (token, head) of the contiguous (T, H_q, D) output
        tl.store(o_ptr + o_rows[:, None] * HEAD_DIM + offs_d[None, :], (acc / l_i[:, None]).to(o_ptr.dtype.element_ty),
                 mask=mask_m[:, None])
        tl.store(lse_ptr + head.to(tl.int64) * T + rows, (m_i + tl.math.log2(l_i)) * LN2, mask=mask_m)


def chunked_prefill(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_table: torch.Tensor,
    cu_seqlens: torch.Tensor,
    context_lens: torch.Tensor,
    sm_scale: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(o, lse) for the new tokens of each sequence, packed as in puzzle 14 (q (T, H_q, D), k, v (T, H_kv, D),
    cu_seqlens), against the sequence's context_lens[b] cached tokens in the pages of k_cache, v_cache
    (num_pages, page_size, H_kv, D) that its row of block_table lists, and its new tokens up to each query."""
    T, H_q, D = q.shape
    _, page_size, H_kv, _ = k_cache.shape
    B = cu_seqlens.shape[0] - 1
    group = H_q // H_kv
    o = torch.empty((T, H_q, D), dtype=q.dtype, device=q.device)
    lse = torch.empty((H_q, T), dtype=torch.float32, device=q.device)
    BLOCK_M, BLOCK_N, num_warps, num_stages = launch_shape(D, q.device)
    BLOCK_M = max(BLOCK_M, group)  # a tile holds at least one token's G heads
    grid = (cdiv(T, BLOCK_M // group), B, H_kv)  # no sequence has more than T new tokens
    _chunked_prefill_fwd[grid](
        q, k, v, k_cache, v_cache, block_table, cu_seqlens, context_lens, o, lse,
        sm_scale * 1.4426950408889634,  # qk_scale: sm_scale * log2(e)
        *q.stride(), *k.stride(), *v.stride(), *k_cache.stride(), *v_cache.stride(), block_table.stride(0), T,
        PAGE_SIZE=page_size, GROUP=group, HEAD_DIM=D, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
        num_warps=num_warps, num_stages=num_stages,
    )
    return o, lse
