"""Puzzle 15 answer key: chunked prefill, the new tokens of each sequence against its cached context and themselves.

Puzzle 14's kernel with a first loop before its own: new token i of sequence b sees the sequence's
context_lens[b] cached tokens, which lie in pages of a cache as in puzzle 13 (key j in page
block_table[b, j // PAGE_SIZE], slot j % PAGE_SIZE), and then its new tokens 0..i, packed beside it as
in puzzle 14. No key of the context is masked by causality: the first loop walks them all, with the
indirect load of puzzle 13, and the second loop walks the new tokens up to the block's last query.
Both loops feed the same running max, sum and output. There is no max_seqlen, so the grid is flat: one
program per block of new tokens of every sequence (sequence b's blocks are numbered from
cu_seqlens[b] // TOKENS + b), and a program finds its sequence by a binary search of cu_seqlens.

Run the grader on it with `python -m checks 15 --solution`.
"""

import torch
import triton
import triton.language as tl

LN2 = tl.constexpr(0.6931471805599453)  # ln(2): turns a base-2 logarithm into a natural one


def launch_shape(head_dim: int, device: torch.device) -> tuple[int, int, int, int]:
    """(BLOCK_M rows of queries, BLOCK_N keys, num_warps, num_stages): puzzle 14's shapes, but 4 warps at D = 64,
    the fastest of six shapes timed there on an H100, 1.2x 8 warps at a context of 0 and 1.4-1.55x at a context of
    4096 (bench/results/2026-12-07-h100-prefill/)."""
    if device.type != "cuda":
        return 64, 32, 4, 1
    return (128, 64, 4 if head_dim <= 64 else 8, 3)


@triton.jit
def _online_softmax_step(q, k, v, m_i, l_i, acc, qk_scale, allowed, MASKED: tl.constexpr):
    """Puzzle 9's update of (m_i, l_i, acc) by one block of keys k and values v; MASKED: only where `allowed`."""
    if MASKED:  # only where `allowed`
        qk = tl.where(allowed, tl.dot(q, tl.trans(k)) * qk_scale, float("-inf"))
        m_ij = tl.maximum(m_i, tl.max(qk, 1))  # finite: an earlier block or key 0 of this one is allowed for every row
        qk = qk - m_ij[:, None]
    else:
        qk = tl.dot(q, tl.trans(k))
        m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        qk = qk * qk_scale - m_ij[:, None]
    p = tl.math.exp2(qk)
    alpha = tl.math.exp2(m_i - m_ij)
    acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
    l_i = l_i * alpha + tl.sum(p, 1)
    return m_ij, l_i, acc


@triton.jit
def _attend_new_tokens(m_i, l_i, acc, q, k_ptr, v_ptr, start, seq_len, block, off_h, offs_m, offs_d, qk_scale,
                       stride_kt, stride_kh, stride_kk, stride_vt, stride_vh, stride_vk,
                       TOKENS: tl.constexpr, BLOCK_N: tl.constexpr):
    """Puzzle 14's causal loops over the packed new keys of the sequence that starts at token `start`, for the block of
    TOKENS new queries `block`: the key blocks wholly before its first query without a mask, then the blocks up to its
    last query, masked."""
    offs_n = tl.arange(0, BLOCK_N)
    hi = tl.minimum(seq_len, (block + 1) * TOKENS)
    lo = block * TOKENS // BLOCK_N * BLOCK_N
    k_seq = k_ptr + start.to(tl.int64) * stride_kt + off_h * stride_kh  # K[start, kv head, 0]
    v_seq = v_ptr + start.to(tl.int64) * stride_vt + off_h * stride_vh
    k_offs = offs_n[:, None] * stride_kt + offs_d[None, :] * stride_kk
    v_offs = offs_n[:, None] * stride_vt + offs_d[None, :] * stride_vk
    k_block = k_seq  # the first block of new keys, then one scalar add per block
    v_block = v_seq
    for _ in range(0, lo, BLOCK_N):
        k = tl.load(k_block + k_offs)
        v = tl.load(v_block + v_offs)
        m_i, l_i, acc = _online_softmax_step(q, k, v, m_i, l_i, acc, qk_scale, None, MASKED=False)
        k_block += BLOCK_N * stride_kt
        v_block += BLOCK_N * stride_vt
    # the masked stage starts from block lo afresh: a pointer carried over from the loop above costs registers in both
    k_block = k_seq + lo.to(tl.int64) * stride_kt
    v_block = v_seq + lo.to(tl.int64) * stride_vt
    for start_n in range(lo, hi, BLOCK_N):
        keys = start_n + offs_n
        k = tl.load(k_block + k_offs, mask=(keys < hi)[:, None], other=0.0)
        v = tl.load(v_block + v_offs, mask=(keys < hi)[:, None], other=0.0)
        allowed = (keys < hi)[None, :] & (keys[None, :] <= offs_m[:, None])
        m_i, l_i, acc = _online_softmax_step(q, k, v, m_i, l_i, acc, qk_scale, allowed, MASKED=True)
        k_block += BLOCK_N * stride_kt
        v_block += BLOCK_N * stride_vt
    return m_i, l_i, acc


@triton.jit
def _find_sequence(cu_seqlens_ptr, pid, num_seqs, TOKENS: tl.constexpr):
    """The sequence of flat program pid: the last b whose first block, cu_seqlens[b] // TOKENS + b, is at or before
    pid. Sequence b has cu_seqlens[b + 1] // TOKENS - cu_seqlens[b] // TOKENS + 1 programs, at least one per block."""
    ### BEGIN SOLUTION
    lo = pid * 0
    hi = lo + num_seqs - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if tl.load(cu_seqlens_ptr + mid) // TOKENS + mid <= pid:
            lo = mid
        else:
            hi = mid - 1
    ### END SOLUTION
    return lo


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
    T, num_seqs,  # new tokens and sequences in all
    PAGE_SIZE: tl.constexpr,
    GROUP: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,  # rows of the query tile: BLOCK_M // GROUP tokens, each with its G heads
    BLOCK_N: tl.constexpr,
):
    ### BEGIN SOLUTION
    TOKENS: tl.constexpr = BLOCK_M // GROUP
    pid = tl.program_id(0)  # a flat index over every sequence's blocks of new tokens
    off_h = tl.program_id(1)  # which kv head
    seq = _find_sequence(cu_seqlens_ptr, pid, num_seqs, TOKENS)
    start = tl.load(cu_seqlens_ptr + seq)
    seq_len = tl.load(cu_seqlens_ptr + seq + 1) - start
    block = pid - (start // TOKENS + seq)  # which block of the sequence's new tokens
    if block * TOKENS < seq_len:  # a sequence's last program may have no block left
        context = tl.load(context_lens_ptr + seq)
        offs_r = tl.arange(0, BLOCK_M)
        offs_m = block * TOKENS + offs_r // GROUP  # each row's new token, inside the sequence
        head = off_h * GROUP + offs_r % GROUP  # each row's query head
        offs_d = tl.arange(0, HEAD_DIM)
        offs_n = tl.arange(0, BLOCK_N)
        mask_m = offs_m < seq_len
        rows = (start + offs_m).to(tl.int64)
        q = tl.load(q_ptr + rows[:, None] * stride_qt + head[:, None] * stride_qh + offs_d[None, :] * stride_qk,
                    mask=mask_m[:, None], other=0.0)  # (BLOCK_M, HEAD_DIM)
        m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
        l_i = tl.zeros((BLOCK_M,), tl.float32)
        acc = tl.zeros((BLOCK_M, HEAD_DIM), tl.float32)
        # -- the context, from the pages block_table lists: every new token sees all of it, masked at context_lens[b]
        table_row = block_table_ptr + seq * stride_bt
        for start_n in range(0, context, BLOCK_N):
            keys = start_n + offs_n
            in_context = keys < context
            page = tl.load(table_row + keys // PAGE_SIZE, mask=in_context, other=0).to(tl.int64)
            k_rows = page * stride_kp + (keys % PAGE_SIZE) * stride_ks + off_h * stride_kch
            v_rows = page * stride_vp + (keys % PAGE_SIZE) * stride_vs + off_h * stride_vch
            k = tl.load(k_cache_ptr + k_rows[:, None] + offs_d[None, :] * stride_kck, mask=in_context[:, None],
                        other=0.0)
            v = tl.load(v_cache_ptr + v_rows[:, None] + offs_d[None, :] * stride_vck, mask=in_context[:, None],
                        other=0.0)
            m_i, l_i, acc = _online_softmax_step(q, k, v, m_i, l_i, acc, qk_scale, in_context[None, :], MASKED=True)
        # -- the new tokens, packed: puzzle 14's causal loops
        m_i, l_i, acc = _attend_new_tokens(m_i, l_i, acc, q, k_ptr, v_ptr, start, seq_len, block, off_h, offs_m, offs_d,
                                           qk_scale, stride_kt, stride_kh, stride_kk, stride_vt, stride_vh, stride_vk,
                                           TOKENS=TOKENS, BLOCK_N=BLOCK_N)
        o_rows = rows * (GROUP * tl.num_programs(1)) + head  # row (token, head) of the contiguous (T, H_q, D) output
        tl.store(o_ptr + o_rows[:, None] * HEAD_DIM + offs_d[None, :], (acc / l_i[:, None]).to(o_ptr.dtype.element_ty),
                 mask=mask_m[:, None])
        tl.store(lse_ptr + head.to(tl.int64) * T + rows, (m_i + tl.math.log2(l_i)) * LN2, mask=mask_m)
    ### END SOLUTION


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
    ### BEGIN SOLUTION
    grid = (T // (BLOCK_M // group) + B, H_kv)  # every block of every sequence, and at most one more per sequence
    _chunked_prefill_fwd[grid](
        q, k, v, k_cache, v_cache, block_table, cu_seqlens, context_lens, o, lse,
        sm_scale * 1.4426950408889634,  # qk_scale: sm_scale * log2(e)
        *q.stride(), *k.stride(), *v.stride(), *k_cache.stride(), *v_cache.stride(), block_table.stride(0), T, B,
        PAGE_SIZE=page_size, GROUP=group, HEAD_DIM=D, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
        num_warps=num_warps, num_stages=num_stages,
    )
    ### END SOLUTION
    return o, lse
