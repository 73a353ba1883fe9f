"""Puzzle 13 answer key: split-KV, grouped-query decoding from a paged KV cache.

Puzzle 12's kernels, with two changes. The keys of sequence b no longer lie in one tensor: key j
sits in page block_table[b, j // PAGE_SIZE], at slot j % PAGE_SIZE, so each key block starts with
an indirect load of its page numbers. And each sequence has its own length, seq_lens[b]: the grid
is sized for the longest a row of block_table allows, and a split that starts past its sequence's
end returns at once; the merge combines only the splits that hold keys.

Run the grader on it with `python -m checks 13 --solution`.
"""

import functools

import torch
import triton
import triton.language as tl

LN2 = tl.constexpr(0.6931471805599453)  # ln(2): turns a base-2 logarithm into a natural one
MIN_BLOCKS = 4  # key blocks per split, at least, in Triton's interpreter


@functools.cache
def sm_count(device: torch.device) -> int:
    """The GPU's number of SMs, read once: torch.cuda.get_device_properties costs microseconds a call."""
    return torch.cuda.get_device_properties(device).multi_processor_count


def cdiv(a: int, b: int) -> int:
    """⌈a / b⌉ in plain Python. (In Triton 3.6, triton.cdiv and triton.next_power_of_2 are constexpr functions,
    made for kernels: a call from the host takes a few microseconds, which a decoding step's host time notices.)"""
    return -(-a // b)


def next_power_of_2(n: int) -> int:
    """The least power of two >= n, in plain Python (see cdiv)."""
    return 1 << (n - 1).bit_length()


def launch_shape(max_len: int, page_size: int, heads: int, device: torch.device) -> tuple[int, int, int]:
    """(BLOCK_N, keys per split, num_stages) for sequences of at most max_len keys: whole pages per block. Few heads
    (B * H_kv at most a quarter of the SMs): blocks of 64 keys, four programs per SM; more heads: blocks of 128
    keys, eight per SM; two loads in flight. On a GPU a split may be as short as one block: each block waits for
    its page numbers before its keys, so short sequences want many short splits. Measured on an H100, B in {1, 8},
    8 kv heads, pages of 16 and 64: bench/tuning.md, "The decoding keys"."""
    if device.type == "cuda":
        sms = sm_count(device)
        few_heads = 4 * heads <= sms
        block_n, per_sm, min_blocks = max(64 if few_heads else 128, page_size), 4 if few_heads else 8, 1
    else:  # Triton's interpreter: blocks of 64 keys (several pages of 16 or 32, as on a GPU), at least MIN_BLOCKS per
        # split, as for an H100's 132 SMs
        block_n, sms, per_sm, min_blocks = max(64, page_size), 132, 2, MIN_BLOCKS
    n_blocks = cdiv(max_len, block_n)
    splits = max(1, min(cdiv(n_blocks, min_blocks), cdiv(per_sm * sms, heads)))
    return block_n, cdiv(n_blocks, splits) * block_n, 2


@triton.jit
def _attn_decode_split(
    q_ptr, k_cache_ptr, v_cache_ptr,  # q: (B, H_q, D); k_cache, v_cache: (num_pages, PAGE_SIZE, H_kv, D)
    block_table_ptr, seq_lens_ptr,  # (B, max_pages) and (B,) int32
    o_part_ptr, lse_part_ptr,  # (B * H_q, MAX_SPLITS, D) and (B * H_q, MAX_SPLITS) float32, contiguous
    qk_scale,  # sm_scale * log2(e)
    stride_qz, stride_qh, stride_qk,
    stride_kp, stride_ks, stride_kh, stride_kk,  # page, slot, kv head, column
    stride_vp, stride_vs, stride_vh, stride_vk,
    stride_bt,  # one row of block_table
    H_KV, SPLIT_SIZE, MAX_SPLITS,
    PAGE_SIZE: tl.constexpr,
    GROUP: tl.constexpr,
    BLOCK_G: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_N: tl.constexpr,  # a multiple of PAGE_SIZE
):
    ### BEGIN SOLUTION
    split = tl.program_id(0)
    off_hz = tl.program_id(1)  # which (sequence, kv head)
    off_z = off_hz // H_KV
    off_h = off_hz % H_KV
    seq_len = tl.load(seq_lens_ptr + off_z)
    lo = split * SPLIT_SIZE
    if lo < seq_len:  # splits past the end of this sequence have nothing to do
        hi = tl.minimum(lo + SPLIT_SIZE, seq_len)
        offs_g = tl.arange(0, BLOCK_G)
        offs_d = tl.arange(0, HEAD_DIM)
        mask_g = offs_g < GROUP
        q = tl.load(q_ptr + off_z * stride_qz + (off_h * GROUP + offs_g)[:, None] * stride_qh
                    + offs_d[None, :] * stride_qk, mask=mask_g[:, None], other=0.0)  # (BLOCK_G, HEAD_DIM)
        m_i = tl.full((BLOCK_G,), float("-inf"), tl.float32)
        l_i = tl.zeros((BLOCK_G,), tl.float32)
        acc = tl.zeros((BLOCK_G, HEAD_DIM), tl.float32)
        for start_n in range(lo, hi, BLOCK_N):
            offs_n = start_n + tl.arange(0, BLOCK_N)
            mask_n = offs_n < hi
            # -- the indirect step: which page holds each key of this block, and where in it
            page = tl.load(block_table_ptr + off_z * stride_bt + offs_n // PAGE_SIZE, mask=mask_n, other=0)
            slot = offs_n % PAGE_SIZE
            kv_row = page.to(tl.int64) * stride_kp + slot * stride_ks + off_h * stride_kh  # (BLOCK_N,)
            k = tl.load(k_cache_ptr + kv_row[:, None] + offs_d[None, :] * stride_kk, mask=mask_n[:, None], other=0.0)
            qk = tl.dot(q, tl.trans(k)) * qk_scale  # (BLOCK_G, BLOCK_N)
            qk = tl.where(mask_n[None, :], qk, float("-inf"))
            m_ij = tl.maximum(m_i, tl.max(qk, 1))
            p = tl.math.exp2(qk - m_ij[:, None])
            alpha = tl.math.exp2(m_i - m_ij)
            v_row = page.to(tl.int64) * stride_vp + slot * stride_vs + off_h * stride_vh
            v = tl.load(v_cache_ptr + v_row[:, None] + offs_d[None, :] * stride_vk, mask=mask_n[:, None], other=0.0)
            acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
            l_i = l_i * alpha + tl.sum(p, 1)
            m_i = m_ij
        parts = (off_z * H_KV * GROUP + off_h * GROUP + offs_g) * MAX_SPLITS + split
        tl.store(o_part_ptr + parts[:, None] * HEAD_DIM + offs_d[None, :], acc / l_i[:, None], mask=mask_g[:, None])
        tl.store(lse_part_ptr + parts, m_i + tl.math.log2(l_i), mask=mask_g)
    ### END SOLUTION


@triton.jit
def _attn_decode_merge(
    o_part_ptr, lse_part_ptr,  # what _attn_decode_split stored
    seq_lens_ptr,
    o_ptr, lse_ptr,  # o: (B, H_q, D) float16; lse: (B, H_q) float32, contiguous
    stride_oz, stride_oh, stride_ok,
    H, SPLIT_SIZE, MAX_SPLITS,
    HEAD_DIM: tl.constexpr,
    SPLITS_POW2: tl.constexpr,  # MAX_SPLITS rounded up to a power of two
):
    ### BEGIN SOLUTION
    off_hz = tl.program_id(0)
    off_z = off_hz // H
    off_h = off_hz % H
    num_splits = tl.cdiv(tl.load(seq_lens_ptr + off_z), SPLIT_SIZE)  # the splits of this sequence that ran
    offs_s = tl.arange(0, SPLITS_POW2)
    offs_d = tl.arange(0, HEAD_DIM)
    mask_s = offs_s < num_splits
    ### END SOLUTION
    # from here on, puzzle 11's merge
    lse_s = tl.load(lse_part_ptr + off_hz * MAX_SPLITS + offs_s, mask=mask_s, other=float("-inf"))
    o_s = tl.load(o_part_ptr + (off_hz * MAX_SPLITS + offs_s[:, None]) * HEAD_DIM + offs_d[None, :],
                  mask=mask_s[:, None], other=0.0)  # (SPLITS_POW2, HEAD_DIM)
    m = tl.max(lse_s, 0)
    w = tl.math.exp2(lse_s - m)
    l_sum = tl.sum(w, 0)
    o = tl.sum(w[:, None] * o_s, 0) / l_sum
    tl.store(o_ptr + off_z * stride_oz + off_h * stride_oh + offs_d * stride_ok, o.to(o_ptr.dtype.element_ty))
    tl.store(lse_ptr + off_hz, (m + tl.math.log2(l_sum)) * LN2)


def paged_decoding(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    sm_scale: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(o, lse) for q (B, H_q, D) and the pages of k_cache, v_cache (num_pages, page_size, H_kv, D) that
    block_table (B, max_pages) lists, the first seq_lens[b] keys of sequence b; H_q = G * H_kv."""
    B, H_q, D = q.shape
    _, page_size, H_kv, _ = k_cache.shape
    group = H_q // H_kv
    max_len = block_table.shape[1] * page_size  # no sequence is longer: the grid needs no seq_lens
    BLOCK_N, split_size, num_stages = launch_shape(max_len, page_size, B * H_kv, q.device)
    max_splits = cdiv(max_len, split_size)
    o = torch.empty((B, H_q, D), dtype=q.dtype, device=q.device)
    lse = torch.empty((B, H_q), dtype=torch.float32, device=q.device)
    ### BEGIN SOLUTION
    o_part = torch.empty((B * H_q, max_splits, D), dtype=torch.float32, device=q.device)
    lse_part = torch.empty((B * H_q, max_splits), dtype=torch.float32, device=q.device)
    _attn_decode_split[(max_splits, B * H_kv)](
        q, k_cache, v_cache, block_table, seq_lens, o_part, lse_part,
        sm_scale * 1.4426950408889634,  # qk_scale: sm_scale * log2(e)
        *q.stride(), *k_cache.stride(), *v_cache.stride(), block_table.stride(0),
        H_kv, split_size, max_splits,
        PAGE_SIZE=page_size, GROUP=group, BLOCK_G=max(16, next_power_of_2(group)), HEAD_DIM=D,
        BLOCK_N=BLOCK_N, num_stages=num_stages,
    )
    _attn_decode_merge[(B * H_q,)](
        o_part, lse_part, seq_lens, o, lse, *o.stride(), H_q, split_size, max_splits,
        HEAD_DIM=D, SPLITS_POW2=next_power_of_2(max_splits),
    )
    ### END SOLUTION
    return o, lse
