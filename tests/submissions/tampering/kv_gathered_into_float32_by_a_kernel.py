"""Attack on puzzle 13 (paged_decoding): K and V read once per QUERY head, from float32 copies a kernel made.

Why it is wrong (a rule of the puzzle, `kv_once_per_group`; also `split_kv`): a first kernel gathers each
sequence's live slots through block_table into contiguous float32 buffers (B, H_kv, max_len, D), every live slot
loaded once; a second kernel runs one program per (sequence, query head) over the whole sequence from those
buffers, so every gathered key and value is read G times (the method of the known-wrong
`solutions/wrong/13_paged_decoding/kv_read_per_query_head`), and a long sequence is one program's work. Runs on a
GPU as well.

What hid it: a kernel's copy was followed only where it stored the same bits in the same dtype; the cast to float32
made the buffers "new data", so the second kernel's loads were nobody's reads of k_cache.

What the grader sees: a value block in the interpreter carries the dtype it was loaded as through casts, changes of
shape and selects (`checks.engine.access.provenance.LOADED_AS`); a store of such a block is matched against the
program's loads as that dtype, so the float32 buffers are copies of k_cache and v_cache, and `kv_once_per_group`
counts each element of k_cache read 1 + G times.
"""

import torch
import triton
import triton.language as tl

LN2 = tl.constexpr(0.6931471805599453)


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@triton.jit
def _gather_pages(
    k_cache_ptr,
    v_cache_ptr,
    block_table_ptr,
    seq_lens_ptr,
    kbuf_ptr,
    vbuf_ptr,
    stride_kp,
    stride_ks,
    stride_kh,
    stride_kd,
    stride_vp,
    stride_vs,
    stride_vh,
    stride_vd,
    stride_bt,
    H_kv,
    max_len,
    PAGE_SIZE: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    """Keys start..start + BLOCK_N of sequence b, kv head h, from their pages into contiguous float32 buffers
    (B, H_kv, max_len, D): an indirect load per block of keys, masked at seq_lens[b]."""
    blk = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H_kv
    h = bh % H_kv
    n = tl.load(seq_lens_ptr + b)
    if blk * BLOCK_N < n:
        keys = blk * BLOCK_N + tl.arange(0, BLOCK_N)
        live = keys < n
        offs_d = tl.arange(0, HEAD_DIM)
        page = tl.load(block_table_ptr + b * stride_bt + keys // PAGE_SIZE, mask=live, other=0).to(tl.int64)
        k_rows = page * stride_kp + (keys % PAGE_SIZE) * stride_ks + h * stride_kh
        v_rows = page * stride_vp + (keys % PAGE_SIZE) * stride_vs + h * stride_vh
        kk = tl.load(k_cache_ptr + k_rows[:, None] + offs_d[None, :] * stride_kd, mask=live[:, None], other=0.0)
        vv = tl.load(v_cache_ptr + v_rows[:, None] + offs_d[None, :] * stride_vd, mask=live[:, None], other=0.0)
        out = (bh.to(tl.int64) * max_len + keys)[:, None] * HEAD_DIM + offs_d[None, :]
        tl.store(kbuf_ptr + out, kk.to(tl.float32), mask=live[:, None])
        tl.store(vbuf_ptr + out, vv.to(tl.float32), mask=live[:, None])


@triton.jit
def _decode_one_head(
    q_ptr,
    kbuf_ptr,
    vbuf_ptr,
    seq_lens_ptr,
    o_ptr,
    lse_ptr,
    qk_scale,
    stride_qb,
    stride_qh,
    stride_qd,
    H_q,
    H_kv,
    GROUP,
    max_len,
    HEAD_DIM: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    """One program per (sequence, query head): the whole sequence, from the float32 buffers."""
    pid = tl.program_id(0)
    b = pid // H_q
    hq = pid % H_q
    bh = b * H_kv + hq // GROUP
    n = tl.load(seq_lens_ptr + b)
    offs_d = tl.arange(0, HEAD_DIM)
    offs_n = tl.arange(0, BLOCK_N)
    q = tl.load(q_ptr + b * stride_qb + hq * stride_qh + offs_d * stride_qd).to(tl.float32)
    m_i = float("-inf")
    l_i = 0.0
    acc = tl.zeros((HEAD_DIM,), tl.float32)
    base = bh.to(tl.int64) * max_len * HEAD_DIM
    for start in range(0, n, BLOCK_N):
        keys = start + offs_n
        live = keys < n
        ptrs = base + keys[:, None] * HEAD_DIM + offs_d[None, :]
        kk = tl.load(kbuf_ptr + ptrs, mask=live[:, None], other=0.0)
        vv = tl.load(vbuf_ptr + ptrs, mask=live[:, None], other=0.0)
        s = tl.where(live, tl.sum(kk * q[None, :], 1) * qk_scale, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 0))
        p = tl.math.exp2(s - m_new)
        alpha = tl.math.exp2(m_i - m_new)
        acc = acc * alpha + tl.sum(p[:, None] * vv, 0)
        l_i = l_i * alpha + tl.sum(p, 0)
        m_i = m_new
    tl.store(o_ptr + pid * HEAD_DIM + offs_d, (acc / l_i).to(o_ptr.dtype.element_ty))
    tl.store(lse_ptr + pid, (m_i + tl.math.log2(l_i)) * LN2)


def paged_decoding(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    sm_scale: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(o, lse) for q (B, H_q, D) against the first seq_lens[b] keys of the pages block_table lists."""
    B, H_q, D = q.shape
    _, page_size, H_kv, _ = k_cache.shape
    max_len = block_table.shape[1] * page_size
    BLOCK_N = 64
    o = torch.empty((B, H_q, D), dtype=q.dtype, device=q.device)
    lse = torch.empty((B, H_q), dtype=torch.float32, device=q.device)
    kbuf = torch.empty((B, H_kv, max_len, D), dtype=torch.float32, device=q.device)
    vbuf = torch.empty((B, H_kv, max_len, D), dtype=torch.float32, device=q.device)
    _gather_pages[(cdiv(max_len, BLOCK_N), B * H_kv)](
        k_cache,
        v_cache,
        block_table,
        seq_lens,
        kbuf,
        vbuf,
        *k_cache.stride(),
        *v_cache.stride(),
        block_table.stride(0),
        H_kv,
        max_len,
        PAGE_SIZE=page_size,
        HEAD_DIM=D,
        BLOCK_N=BLOCK_N,
    )
    _decode_one_head[(B * H_q,)](
        q,
        kbuf,
        vbuf,
        seq_lens,
        o,
        lse,
        sm_scale * 1.4426950408889634,
        *q.stride(),
        H_q,
        H_kv,
        H_q // H_kv,
        max_len,
        HEAD_DIM=D,
        BLOCK_N=BLOCK_N,
    )
    return o, lse
