"""Puzzle 11 answer key: flash decoding (split-KV), one query per head against a long cache of keys.

Decoding is memory-bound and has only B * H query rows, too few programs to fill a GPU when the
batch is small. So the key range of each head is split: `_attn_decode_split` runs one program per
(split, batch * head), walks its share of the keys with puzzle 7's online softmax and stores a
partial result (its normalised output and its logsumexp, base 2); `_attn_decode_merge` then
combines the splits of each head with the same rescale, in logsumexp form. K and V are read once.

The query is padded to BLOCK_M = 16 rows (row 0 is the query, the others zeros) so that both products
are `tl.dot`s on float16 tiles: fifteen rows of the tensor cores' work are thrown away, but the kernel
reads K and V faster than the vector form (`tl.sum(q[None, :] * k, 1)`, which the lesson builds first):
bench/tuning.md, "The decoding keys", has both forms measured.

Run the grader on it with `python -m checks 11 --solution`.
"""

import functools

import torch
import triton
import triton.language as tl

LN2 = tl.constexpr(0.6931471805599453)  # ln(2): turns a base-2 logarithm into a natural one
BLOCK_M = tl.constexpr(16)  # the key pads the one query to a tensor-core tile's height: rows for tl.dot
MIN_BLOCKS = 4  # key blocks per split, at least
# A grid of about 8 programs per SM. An SM holds one program of the split kernel at a time (its 136 KiB of shared
# memory: bench/results/2026-12-06-cpu-sm90a-occupancy/), whose loads in flight are its pipeline's (num_stages=3);
# 8 per SM took 5-9% less time than 4 at B = 1, N >= 65536 on an H200 (bench/tuning.md, "The decoding keys").
PROGRAMS_PER_SM = 8


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


def launch_shape(n_ctx: int, heads: int, device: torch.device) -> tuple[int, int]:
    """(BLOCK_N, keys per split): enough splits for a grid of about PROGRAMS_PER_SM programs per SM, but at
    least MIN_BLOCKS key blocks per split, so that a split's work outweighs storing its partial result."""
    if device.type == "cuda":  # 128 keys of 128 dims: 32 KiB of K per block
        block_n, sms = 128, sm_count(device)
    else:  # Triton's interpreter: smaller blocks, split as for an H100's 132 SMs
        block_n, sms = 16, 132
    n_blocks = cdiv(n_ctx, block_n)
    splits = max(1, min(cdiv(n_blocks, MIN_BLOCKS), cdiv(PROGRAMS_PER_SM * sms, heads)))
    return block_n, cdiv(n_blocks, splits) * block_n


@triton.jit
def _attn_decode_split(
    q_ptr, k_ptr, v_ptr,  # q: (B, H, D); k, v: (B, H, N, D)
    o_part_ptr, lse_part_ptr,  # (B * H, NUM_SPLITS, D) and (B * H, NUM_SPLITS) float32, contiguous
    qk_scale,  # sm_scale * log2(e)
    stride_qz, stride_qh, stride_qk,
    stride_kz, stride_kh, stride_kn, stride_kk,
    stride_vz, stride_vh, stride_vn, stride_vk,
    H, N_CTX, SPLIT_SIZE, NUM_SPLITS,
    HEAD_DIM: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    ### BEGIN SOLUTION
    split = tl.program_id(0)  # which range of SPLIT_SIZE keys
    off_hz = tl.program_id(1)  # which (batch, head)
    off_z, off_h = off_hz // H, off_hz % H
    offs_m, offs_d = tl.arange(0, BLOCK_M), tl.arange(0, HEAD_DIM)
    is_query = offs_m == 0  # row 0 is the query; rows 1.. are zeros, computed and thrown away
    q = tl.load(q_ptr + off_z * stride_qz + off_h * stride_qh + offs_m[:, None] * 0 + offs_d[None, :] * stride_qk,
                mask=is_query[:, None], other=0.0)  # (BLOCK_M, HEAD_DIM)
    k_base = k_ptr + off_z.to(tl.int64) * stride_kz + off_h.to(tl.int64) * stride_kh
    v_base = v_ptr + off_z.to(tl.int64) * stride_vz + off_h.to(tl.int64) * stride_vh

    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)  # running max, base-2 units
    l_i = tl.zeros((BLOCK_M,), tl.float32)  # running sum of exp2(score - m_i)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), tl.float32)  # running sum of p * v
    lo = split * SPLIT_SIZE
    hi = tl.minimum(lo + SPLIT_SIZE, N_CTX)
    for start_n in range(lo, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        mask_n = offs_n < hi
        k = tl.load(k_base + offs_n[:, None] * stride_kn + offs_d[None, :] * stride_kk,
                    mask=mask_n[:, None], other=0.0)  # (BLOCK_N, HEAD_DIM)
        qk = tl.dot(q, tl.trans(k)) * qk_scale  # (BLOCK_M, BLOCK_N): row 0 holds the scores
        qk = tl.where(mask_n[None, :], qk, float("-inf"))
        # -- puzzle 7's update: a new max rescales what was summed so far
        m_ij = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_ij[:, None])
        alpha = tl.math.exp2(m_i - m_ij)
        v = tl.load(v_base + offs_n[:, None] * stride_vn + offs_d[None, :] * stride_vk,
                    mask=mask_n[:, None], other=0.0)  # (BLOCK_N, HEAD_DIM)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        m_i = m_ij
    # this split's partial result (row 0): its own softmax-weighted average of V, and its logsumexp (base 2)
    part = off_hz * NUM_SPLITS + split
    tl.store(o_part_ptr + part * HEAD_DIM + offs_m[:, None] * 0 + offs_d[None, :], acc / l_i[:, None],
             mask=is_query[:, None])
    tl.store(lse_part_ptr + part + offs_m * 0, m_i + tl.math.log2(l_i), mask=is_query)
    ### END SOLUTION


@triton.jit
def _attn_decode_merge(
    o_part_ptr, lse_part_ptr,  # what _attn_decode_split stored
    o_ptr, lse_ptr,  # o: (B, H, D) float16; lse: (B, H) float32, contiguous
    stride_oz, stride_oh, stride_ok,
    H, NUM_SPLITS,
    HEAD_DIM: tl.constexpr,
    SPLITS_POW2: tl.constexpr,  # NUM_SPLITS rounded up to a power of two
):
    ### BEGIN SOLUTION
    off_hz = tl.program_id(0)
    off_z = off_hz // H
    off_h = off_hz % H
    offs_s = tl.arange(0, SPLITS_POW2)
    offs_d = tl.arange(0, HEAD_DIM)
    mask_s = offs_s < NUM_SPLITS
    lse_s = tl.load(lse_part_ptr + off_hz * NUM_SPLITS + offs_s, mask=mask_s, other=float("-inf"))
    o_s = tl.load(o_part_ptr + (off_hz * NUM_SPLITS + offs_s[:, None]) * HEAD_DIM + offs_d[None, :],
                  mask=mask_s[:, None], other=0.0)  # (SPLITS_POW2, HEAD_DIM)
    # split s holds o_s = sum_j p_j v_j / l_s with l_s = 2^(lse_s - m) relative to the common max m
    m = tl.max(lse_s, 0)
    w = tl.math.exp2(lse_s - m)  # each split's share of the total sum, up to 1 / l_sum
    l_sum = tl.sum(w, 0)
    o = tl.sum(w[:, None] * o_s, 0) / l_sum
    tl.store(o_ptr + off_z * stride_oz + off_h * stride_oh + offs_d * stride_ok, o.to(o_ptr.dtype.element_ty))
    tl.store(lse_ptr + off_hz, (m + tl.math.log2(l_sum)) * LN2)
    ### END SOLUTION


def flash_decoding(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, sm_scale: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """(o, lse) for q (B, H, D) and k, v (B, H, N, D), float16, any strides: one query per head."""
    B, H, N, D = k.shape
    BLOCK_N, split_size = launch_shape(N, B * H, q.device)
    num_splits = cdiv(N, split_size)
    o = torch.empty((B, H, D), dtype=q.dtype, device=q.device)
    lse = torch.empty((B, H), dtype=torch.float32, device=q.device)
    ### BEGIN SOLUTION
    o_part = torch.empty((B * H, num_splits, D), dtype=torch.float32, device=q.device)
    lse_part = torch.empty((B * H, num_splits), dtype=torch.float32, device=q.device)
    _attn_decode_split[(num_splits, B * H)](
        q, k, v, o_part, lse_part, sm_scale * 1.4426950408889634,  # qk_scale: sm_scale * log2(e)
        *q.stride(), *k.stride(), *v.stride(),
        H, N, split_size, num_splits, HEAD_DIM=D, BLOCK_N=BLOCK_N,
    )
    _attn_decode_merge[(B * H,)](
        o_part, lse_part, o, lse, *o.stride(), H, num_splits,
        HEAD_DIM=D, SPLITS_POW2=next_power_of_2(num_splits),
    )
    ### END SOLUTION
    return o, lse
