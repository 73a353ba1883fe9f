"""Puzzle 14, another design: a flat grid over the query blocks of every sequence, with a search of cu_seqlens.

Not a puzzle: `make bench` times it beside the answer key (solutions/14_varlen_attention.py), as a `variants` entry
of puzzle 14's bench entry in puzzles.yaml. It defines the same function as the answer key and passes the same
grader: `python -m checks 14 --file solutions/variants/14_flat_grid_search.py`.

The answer key's grid is (cdiv(max_seqlen, tokens per block), B, H_kv): a batch of one long sequence and many short
ones starts mostly programs that return at once. Here the grid is (T // tokens per block + B, H_kv): sequence b's
blocks are numbered from cu_seqlens[b] // TOKENS + b, an increasing number, so a program finds its sequence by a
binary search of cu_seqlens, and at most one program per sequence returns at once.
"""

import torch
import triton
import triton.language as tl

LN2 = tl.constexpr(0.6931471805599453)  # ln(2): turns a base-2 logarithm into a natural one


def cdiv(a: int, b: int) -> int:
    """⌈a / b⌉ in plain Python."""
    return -(-a // b)


def launch_shape(head_dim: int, device: torch.device) -> tuple[int, int, int, int]:
    """(BLOCK_M rows of queries, BLOCK_N keys, num_warps, num_stages): in Triton's interpreter, small tiles; on a GPU,
    puzzle 9's tiles (fewer rows for D = 128, whose tiles hold twice the columns)."""
    if device.type != "cuda":
        return 64, 32, 4, 1
    return (128, 64, 8, 2) if head_dim <= 64 else (128, 32, 8, 2)


@triton.jit
def _varlen_attn_fwd(
    q_ptr, k_ptr, v_ptr,  # q: (T, H_q, D); k, v: (T, H_kv, D), any strides
    cu_seqlens_ptr,  # (B + 1,) int32: sequence b is tokens cu_seqlens[b] .. cu_seqlens[b + 1] - 1
    o_ptr, lse_ptr,  # o: (T, H_q, D) contiguous; lse: (H_q, T) float32 contiguous
    qk_scale,  # sm_scale * log2(e)
    stride_qt, stride_qh, stride_qk,
    stride_kt, stride_kh, stride_kk,
    stride_vt, stride_vh, stride_vk,
    T, NUM_SEQS,  # tokens and sequences in all
    GROUP: tl.constexpr,  # G query heads per kv head
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,  # rows of the query tile: BLOCK_M // GROUP tokens, each with its G heads
    BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr,
):
    TOKENS: tl.constexpr = BLOCK_M // GROUP
    pid = tl.program_id(0)  # a flat index over every sequence's query blocks
    off_h = tl.program_id(1)  # which kv head
    lo = pid * 0
    hi = pid * 0 + NUM_SEQS - 1
    while lo < hi:  # the last sequence whose first block, cu_seqlens[b] // TOKENS + b, is at or before pid
        mid = (lo + hi + 1) // 2
        if tl.load(cu_seqlens_ptr + mid) // TOKENS + mid <= pid:
            lo = mid
        else:
            hi = mid - 1
    seq = lo
    start = tl.load(cu_seqlens_ptr + seq)
    seq_len = tl.load(cu_seqlens_ptr + seq + 1) - start
    block = pid - (start // TOKENS + seq)
    if block * TOKENS < seq_len:  # query blocks past the end of this sequence have nothing to do
        offs_r = tl.arange(0, BLOCK_M)
        offs_m = block * TOKENS + offs_r // GROUP  # each row's token, inside the sequence
        head = off_h * GROUP + offs_r % GROUP  # each row's query head
        offs_d = tl.arange(0, HEAD_DIM)
        mask_m = offs_m < seq_len
        rows = (start + offs_m).to(tl.int64)  # token * stride may pass 2^31
        q = tl.load(q_ptr + rows[:, None] * stride_qt + head[:, None] * stride_qh + offs_d[None, :] * stride_qk,
                    mask=mask_m[:, None], other=0.0)  # (BLOCK_M, HEAD_DIM)
        m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
        l_i = tl.zeros((BLOCK_M,), tl.float32)
        acc = tl.zeros((BLOCK_M, HEAD_DIM), tl.float32)
        hi = tl.minimum(seq_len, (block + 1) * TOKENS) if CAUSAL else seq_len  # causal: no key past the last query
        for start_n in range(0, hi, BLOCK_N):
            offs_n = start_n + tl.arange(0, BLOCK_N)
            mask_n = offs_n < hi
            cols = (start + offs_n).to(tl.int64)
            k = tl.load(k_ptr + cols[:, None] * stride_kt + off_h * stride_kh + offs_d[None, :] * stride_kk,
                        mask=mask_n[:, None], other=0.0)  # (BLOCK_N, HEAD_DIM)
            qk = tl.dot(q, tl.trans(k)) * qk_scale
            allowed = mask_n[None, :]
            if CAUSAL:
                allowed = allowed & (offs_n[None, :] <= offs_m[:, None])
            qk = tl.where(allowed, qk, float("-inf"))
            m_ij = tl.maximum(m_i, tl.max(qk, 1))  # finite: key 0 of the first block is allowed for every row
            p = tl.math.exp2(qk - m_ij[:, None])
            alpha = tl.math.exp2(m_i - m_ij)
            v = tl.load(v_ptr + cols[:, None] * stride_vt + off_h * stride_vh + offs_d[None, :] * stride_vk,
                        mask=mask_n[:, None], other=0.0)
            acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
            l_i = l_i * alpha + tl.sum(p, 1)
            m_i = m_ij
        o_rows = rows * (GROUP * tl.num_programs(1)) + head  # row (token, head) of the contiguous (T, H_q, D) output
        tl.store(o_ptr + o_rows[:, None] * HEAD_DIM + offs_d[None, :], (acc / l_i[:, None]).to(o_ptr.dtype.element_ty),
                 mask=mask_m[:, None])
        tl.store(lse_ptr + head.to(tl.int64) * T + rows, (m_i + tl.math.log2(l_i)) * LN2, mask=mask_m)


def varlen_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens: torch.Tensor,
    max_seqlen: int,
    causal: bool,
    sm_scale: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(o, lse) for sequences packed along the first dimension of q (T, H_q, D) and k, v (T, H_kv, D): sequence b is
    tokens cu_seqlens[b] to cu_seqlens[b + 1] - 1 and attends to its own tokens only; H_q = G * H_kv."""
    T, H_q, D = q.shape
    H_kv = k.shape[1]
    B = cu_seqlens.shape[0] - 1
    group = H_q // H_kv
    o = torch.empty((T, H_q, D), dtype=q.dtype, device=q.device)
    lse = torch.empty((H_q, T), dtype=torch.float32, device=q.device)
    BLOCK_M, BLOCK_N, num_warps, num_stages = launch_shape(D, q.device)
    BLOCK_M = max(BLOCK_M, group)  # a tile holds at least one token's G heads
    grid = (T // (BLOCK_M // group) + B, H_kv)  # every block of every sequence, and some that return at once
    _varlen_attn_fwd[grid](
        q, k, v, cu_seqlens, o, lse,
        sm_scale * 1.4426950408889634,  # qk_scale: sm_scale * log2(e)
        *q.stride(), *k.stride(), *v.stride(), T, B,
        GROUP=group, HEAD_DIM=D, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, CAUSAL=causal,
        num_warps=num_warps, num_stages=num_stages,
    )
    return o, lse
