"""Attack: puzzle 14 with causal key blocks not skipped (every program walks its sequence's keys to the end, as the
known-wrong `causal_not_skipped`), its output added with `tl.atomic_add` into a float32 buffer of zeros that the host
casts to float16, and its q tile loaded in two halves of rows. A rule that takes a program's queries from its plain
stores to o sees no program own any query, and one that counts blocks of queries by the boxes of q's loads allows
twice the K and V reads; the grader takes a program's queries from what it loads of q, over all its loads.
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
    128 x 64 tiles over 8 warps, three loads in flight: the fastest of six shapes timed at D = 128 on an H200, or within
    2% of it (bench/results/2026-12-06-h200-prefill/)."""
    if device.type != "cuda":
        return 64, 32, 4, 1
    return (128, 64, 8, 3)


@triton.jit
def _attend_keys(
    acc,
    l_i,
    m_i,  # the running state of this query tile: (BLOCK_M, HEAD_DIM), (BLOCK_M,), (BLOCK_M,)
    q,  # (BLOCK_M, HEAD_DIM)
    k_block,
    v_block,  # pointers to key lo's row of K and of V (its kv head, column 0)
    lo,
    hi,  # this stage walks the keys lo, lo + BLOCK_N, ... below hi, positions inside the sequence
    offs_m,
    offs_d,  # each row's token inside the sequence; the head dim's columns
    qk_scale,
    stride_kt,
    stride_kk,
    stride_vt,
    stride_vk,
    BLOCK_N: tl.constexpr,
    MASKED: tl.constexpr,  # blocks that may hold keys at or past hi or, causal, past a row's own token
    CAUSAL: tl.constexpr,
):
    """Puzzle 9's online softmax over one stage of key blocks, inside one sequence."""
    offs_n = tl.arange(0, BLOCK_N)
    k_offs = offs_n[:, None] * stride_kt + offs_d[None, :] * stride_kk  # (BLOCK_N, HEAD_DIM), the same every block
    v_offs = offs_n[:, None] * stride_vt + offs_d[None, :] * stride_vk
    for start_n in range(lo, hi, BLOCK_N):
        if MASKED:
            ### BEGIN SOLUTION
            keys = start_n + offs_n
            k = tl.load(k_block + k_offs, mask=(keys < hi)[:, None], other=0.0)  # (BLOCK_N, HEAD_DIM)
            allowed = (keys < hi)[None, :]
            if CAUSAL:
                allowed = allowed & (keys[None, :] <= offs_m[:, None])
            qk = tl.where(allowed, tl.dot(q, tl.trans(k)) * qk_scale, float("-inf"))
            m_ij = tl.maximum(m_i, tl.max(qk, 1))  # finite: key 0 or an earlier block is allowed for every row
            qk = qk - m_ij[:, None]
            v = tl.load(v_block + v_offs, mask=(keys < hi)[:, None], other=0.0)
            ### END SOLUTION
        else:  # every key of the block is seen by every row
            k = tl.load(k_block + k_offs)
            qk = tl.dot(q, tl.trans(k))
            m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
            qk = qk * qk_scale - m_ij[:, None]
            v = tl.load(v_block + v_offs)
        ### BEGIN SOLUTION
        p = tl.math.exp2(qk)
        alpha = tl.math.exp2(m_i - m_ij)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        m_i = m_ij
        ### END SOLUTION
        k_block += BLOCK_N * stride_kt  # the next block: one scalar add
        v_block += BLOCK_N * stride_vt
    return acc, l_i, m_i


@triton.jit
def _varlen_attn_fwd(
    q_ptr,
    k_ptr,
    v_ptr,  # q: (T, H_q, D); k, v: (T, H_kv, D), any strides
    cu_seqlens_ptr,  # (B + 1,) int32: sequence b is tokens cu_seqlens[b] .. cu_seqlens[b + 1] - 1
    o_ptr,
    lse_ptr,  # o: (T, H_q, D) contiguous; lse: (H_q, T) float32 contiguous
    qk_scale,  # sm_scale * log2(e)
    stride_qt,
    stride_qh,
    stride_qk,
    stride_kt,
    stride_kh,
    stride_kk,
    stride_vt,
    stride_vh,
    stride_vk,
    T,  # tokens in all
    GROUP: tl.constexpr,  # G query heads per kv head
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,  # rows of the query tile: BLOCK_M // GROUP tokens, each with its G heads
    BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr,
):
    ### BEGIN SOLUTION
    block = tl.program_id(0)  # which query block of the sequence
    seq = tl.program_id(1)
    off_h = tl.program_id(2)  # which kv head
    start = tl.load(cu_seqlens_ptr + seq)
    seq_len = tl.load(cu_seqlens_ptr + seq + 1) - start
    TOKENS: tl.constexpr = BLOCK_M // GROUP
    if block * TOKENS < seq_len:  # query blocks past the end of this sequence have nothing to do
        offs_r = tl.arange(0, BLOCK_M)
        offs_m = block * TOKENS + offs_r // GROUP  # each row's token, inside the sequence
        head = off_h * GROUP + offs_r % GROUP  # each row's query head
        offs_d = tl.arange(0, HEAD_DIM)
        mask_m = offs_m < seq_len
        rows = (start + offs_m).to(tl.int64)  # token * stride may pass 2^31
        q_ptrs = q_ptr + rows[:, None] * stride_qt + head[:, None] * stride_qh + offs_d[None, :] * stride_qk
        upper = (offs_r < BLOCK_M // 2)[:, None]  # the tile in two halves of rows, each its own load
        q = tl.load(q_ptrs, mask=mask_m[:, None] & upper, other=0.0) + tl.load(
            q_ptrs, mask=mask_m[:, None] & ~upper, other=0.0
        )  # (BLOCK_M, HEAD_DIM)
        m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
        l_i = tl.zeros((BLOCK_M,), tl.float32)
        acc = tl.zeros((BLOCK_M, HEAD_DIM), tl.float32)
        k_seq = k_ptr + start.to(tl.int64) * stride_kt + off_h * stride_kh  # K[start, kv head, 0]
        v_seq = v_ptr + start.to(tl.int64) * stride_vt + off_h * stride_vh
        # causal: no key past the block's last query, and the key blocks wholly before its first query need no
        # mask; not causal: only the last block, which may pass the sequence's end, is masked
        hi = seq_len  # every key of the sequence, causal or not (the mask hides the later ones)
        lo = (block * TOKENS if CAUSAL else seq_len) // BLOCK_N * BLOCK_N
        acc, l_i, m_i = _attend_keys(
            acc,
            l_i,
            m_i,
            q,
            k_seq,
            v_seq,
            0,
            lo,
            offs_m,
            offs_d,
            qk_scale,
            stride_kt,
            stride_kk,
            stride_vt,
            stride_vk,
            BLOCK_N=BLOCK_N,
            MASKED=False,
            CAUSAL=CAUSAL,
        )
        acc, l_i, m_i = _attend_keys(
            acc,
            l_i,
            m_i,
            q,
            k_seq + lo.to(tl.int64) * stride_kt,
            v_seq + lo.to(tl.int64) * stride_vt,
            lo,
            hi,
            offs_m,
            offs_d,
            qk_scale,
            stride_kt,
            stride_kk,
            stride_vt,
            stride_vk,
            BLOCK_N=BLOCK_N,
            MASKED=True,
            CAUSAL=CAUSAL,
        )
        o_rows = rows * (GROUP * tl.num_programs(2)) + head  # row (token, head) of the contiguous (T, H_q, D) output
        tl.atomic_add(
            o_ptr + o_rows[:, None] * HEAD_DIM + offs_d[None, :], acc / l_i[:, None], mask=mask_m[:, None]
        )  # into o32, zeros: one program adds to each element once
        tl.store(lse_ptr + head.to(tl.int64) * T + rows, (m_i + tl.math.log2(l_i)) * LN2, mask=mask_m)
    ### END SOLUTION


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
    o32 = torch.zeros((T, H_q, D), dtype=torch.float32, device=q.device)
    lse = torch.empty((H_q, T), dtype=torch.float32, device=q.device)
    BLOCK_M, BLOCK_N, num_warps, num_stages = launch_shape(D, q.device)
    BLOCK_M = max(BLOCK_M, group)  # a tile holds at least one token's G heads
    ### BEGIN SOLUTION
    grid = (cdiv(max_seqlen, BLOCK_M // group), B, H_kv)  # sized for the longest sequence
    _varlen_attn_fwd[grid](
        q,
        k,
        v,
        cu_seqlens,
        o32,
        lse,
        sm_scale * 1.4426950408889634,  # qk_scale: sm_scale * log2(e)
        *q.stride(),
        *k.stride(),
        *v.stride(),
        T,
        GROUP=group,
        HEAD_DIM=D,
        BLOCK_M=BLOCK_M,
        BLOCK_N=BLOCK_N,
        CAUSAL=causal,
        num_warps=num_warps,
        num_stages=num_stages,
    )
    ### END SOLUTION
    return o32.to(q.dtype), lse
