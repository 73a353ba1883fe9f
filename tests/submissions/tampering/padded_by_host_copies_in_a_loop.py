"""Attack on puzzle 14 (varlen_attention): q, k and v padded to max_seqlen by a host loop over the sequences.

Why it is wrong (two rules of the puzzle, `no_padded_work` and the "no host loop over sequences" that
`one_launch_per_kernel` stands for): the host reads cu_seqlens (`.tolist()`), allocates zero buffers of B x
max_seqlen rows for q, k and v, and copies each sequence into its padded slot with three `copy_` per sequence, in a
Python loop over the batch; the kernel (the answer key reading the padded rows) then runs on them. This is the
known-wrong `solutions/wrong/14_varlen_attention/padded_copy` (rejected by `no_padded_work` because its padding is
done in a kernel) with the padding moved to the host: case 5 (one sequence of 400 among 11 short ones) moves and
zero-fills 12 x 400 token rows for 421 real ones, and the plan holds 3B copies.

What hid it: `no_padded_work` (`checks/engine/judging/rules/prefill.py`) counted only the elements the KERNELS
stored or loaded in the call's own buffers (`distinct_touched`, from `log.writes`/`log.reads`): the host's
`torch.zeros` fills and `copy_`s are not among them, and the kernel loads only the real rows of the padded copy (a
host copy of q is read as q, so `own_sequence` and `kv_once_per_query_block` see the right tokens).
`one_launch_per_kernel` counts launches only, not a loop of copies (it still does).

What the grader sees: `one_launch_per_kernel` counts the plan's copies of parts of q, k and v (`AccessLog.copies`):
a copy per sequence is a Python loop over the sequences (case 1: q copied in 3 parts for 3 sequences). Without the
loop, `no_padded_work` counts the buffers the host filled with copies of the inputs: one of more token rows than the
real tokens and a block's tail per sequence is padding (case 5: 4800 token rows for 421 tokens; the tampering
submission padded_by_one_host_copy).
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
    MAXLEN,  # rows per sequence in the padded copies of q, k, v
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
        prows = seq.to(tl.int64) * MAXLEN + offs_m  # the same tokens in the padded copies
        q = tl.load(
            q_ptr + prows[:, None] * stride_qt + head[:, None] * stride_qh + offs_d[None, :] * stride_qk,
            mask=mask_m[:, None],
            other=0.0,
        )  # (BLOCK_M, HEAD_DIM)
        m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
        l_i = tl.zeros((BLOCK_M,), tl.float32)
        acc = tl.zeros((BLOCK_M, HEAD_DIM), tl.float32)
        k_seq = k_ptr + seq.to(tl.int64) * MAXLEN * stride_kt + off_h * stride_kh  # K[start, kv head, 0]
        v_seq = v_ptr + seq.to(tl.int64) * MAXLEN * stride_vt + off_h * stride_vh
        # causal: no key past the block's last query, and the key blocks wholly before its first query need no
        # mask; not causal: only the last block, which may pass the sequence's end, is masked
        hi = tl.minimum(seq_len, (block + 1) * TOKENS) if CAUSAL else seq_len
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
        tl.store(
            o_ptr + o_rows[:, None] * HEAD_DIM + offs_d[None, :],
            (acc / l_i[:, None]).to(o_ptr.dtype.element_ty),
            mask=mask_m[:, None],
        )
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
    o = torch.empty((T, H_q, D), dtype=q.dtype, device=q.device)
    lse = torch.empty((H_q, T), dtype=torch.float32, device=q.device)
    BLOCK_M, BLOCK_N, num_warps, num_stages = launch_shape(D, q.device)
    BLOCK_M = max(BLOCK_M, group)  # a tile holds at least one token's G heads
    ### BEGIN SOLUTION
    # copy each sequence into a buffer padded to max_seqlen rows per sequence, with a host loop over the sequences
    cu = cu_seqlens.tolist()
    qp = torch.zeros((B * max_seqlen, H_q, D), dtype=q.dtype, device=q.device)
    kp = torch.zeros((B * max_seqlen, H_kv, D), dtype=k.dtype, device=q.device)
    vp = torch.zeros((B * max_seqlen, H_kv, D), dtype=v.dtype, device=q.device)
    for b in range(B):
        n = cu[b + 1] - cu[b]
        qp[b * max_seqlen : b * max_seqlen + n].copy_(q[cu[b] : cu[b + 1]])
        kp[b * max_seqlen : b * max_seqlen + n].copy_(k[cu[b] : cu[b + 1]])
        vp[b * max_seqlen : b * max_seqlen + n].copy_(v[cu[b] : cu[b + 1]])
    q, k, v = qp, kp, vp
    grid = (cdiv(max_seqlen, BLOCK_M // group), B, H_kv)  # sized for the longest sequence
    _varlen_attn_fwd[grid](
        q,
        k,
        v,
        cu_seqlens,
        o,
        lse,
        sm_scale * 1.4426950408889634,  # qk_scale: sm_scale * log2(e)
        *q.stride(),
        *k.stride(),
        *v.stride(),
        T,
        max_seqlen,
        GROUP=group,
        HEAD_DIM=D,
        BLOCK_M=BLOCK_M,
        BLOCK_N=BLOCK_N,
        CAUSAL=causal,
        num_warps=num_warps,
        num_stages=num_stages,
    )
    ### END SOLUTION
    return o, lse
