"""Puzzle 12 answer key: split-KV decoding with grouped-query attention (G query heads per head of K and V).

As in puzzle 11, `_attn_decode_split` runs one program per (split, batch * kv head) and
`_attn_decode_merge` combines the splits in logsumexp form. What changes is the group: the G query
heads that share a head of K and V are loaded together as the rows of one (BLOCK_G, HEAD_DIM) tile,
so that each tile of K and V is loaded once for all G of them and both products run on tensor cores.
The tile is padded to 16 rows by choice, not because tl.dot requires it (Triton 3.6 takes any M >= 1
on NVIDIA GPUs, with K >= 16): a tensor-core instruction works on 16 rows anyway, so the padding costs
nothing that a smaller tile would save, and decoding, bound by memory, has arithmetic to spare.

Run the grader on it with `python -m checks 12 --solution`.
"""

import functools

import torch
import triton
import triton.language as tl

LN2 = tl.constexpr(0.6931471805599453)  # ln(2): turns a base-2 logarithm into a natural one
MIN_BLOCKS = 4  # key blocks per split, at least


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


def launch_shape(n_ctx: int, heads: int, device: torch.device) -> tuple[int, int, int]:
    """(BLOCK_N, keys per split, num_stages): at least MIN_BLOCKS key blocks per split, so that a split's work
    outweighs storing its partial result, and enough splits to give every SM two programs of 64-key blocks where
    there are few heads (B * H_kv at most a quarter of the SMs), eight of 128-key blocks where there are more; three
    loads in flight. Measured on an H100 over B in {1, 8}, 8 kv heads (bench/tuning.md, "The decoding keys"; on an
    H200, four programs of 64-key blocks with two loads in flight were 1-3% faster where there are more heads)."""
    if device.type == "cuda":
        sms = sm_count(device)
        block_n, per_sm = (64, 2) if 4 * heads <= sms else (128, 8)
    else:  # Triton's interpreter: smaller blocks, split as for an H100's 132 SMs
        block_n, sms, per_sm = 16, 132, 2
    n_blocks = cdiv(n_ctx, block_n)
    splits = max(1, min(cdiv(n_blocks, MIN_BLOCKS), cdiv(per_sm * sms, heads)))
    return block_n, cdiv(n_blocks, splits) * block_n, 3


@triton.jit
def _attn_decode_split(
    q_ptr, k_ptr, v_ptr,  # q: (B, H_q, D); k, v: (B, H_kv, N, D)
    o_part_ptr, lse_part_ptr,  # (B * H_q, NUM_SPLITS, D) and (B * H_q, NUM_SPLITS) float32, contiguous
    qk_scale,  # sm_scale * log2(e)
    stride_qz, stride_qh, stride_qk,
    stride_kz, stride_kh, stride_kn, stride_kk,
    stride_vz, stride_vh, stride_vn, stride_vk,
    H_KV, N_CTX, SPLIT_SIZE, NUM_SPLITS,
    GROUP: tl.constexpr,  # G query heads per kv head
    BLOCK_G: tl.constexpr,  # GROUP padded to at least 16 rows: a tensor-core tile's height (a choice)
    HEAD_DIM: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    ### BEGIN SOLUTION
    split = tl.program_id(0)
    off_hz = tl.program_id(1)  # which (batch, kv head)
    off_z = off_hz // H_KV
    off_h = off_hz % H_KV
    offs_g = tl.arange(0, BLOCK_G)  # the group's query heads are off_h * GROUP + offs_g
    offs_d = tl.arange(0, HEAD_DIM)
    mask_g = offs_g < GROUP
    q = tl.load(q_ptr + off_z * stride_qz + (off_h * GROUP + offs_g)[:, None] * stride_qh + offs_d[None, :] * stride_qk,
                mask=mask_g[:, None], other=0.0)  # (BLOCK_G, HEAD_DIM): padding rows are 0
    k_base = k_ptr + off_z.to(tl.int64) * stride_kz + off_h.to(tl.int64) * stride_kh
    v_base = v_ptr + off_z.to(tl.int64) * stride_vz + off_h.to(tl.int64) * stride_vh

    m_i = tl.full((BLOCK_G,), float("-inf"), tl.float32)
    l_i = tl.zeros((BLOCK_G,), tl.float32)
    acc = tl.zeros((BLOCK_G, HEAD_DIM), tl.float32)
    lo = split * SPLIT_SIZE
    hi = tl.minimum(lo + SPLIT_SIZE, N_CTX)
    for start_n in range(lo, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        mask_n = offs_n < hi
        k = tl.load(k_base + offs_n[:, None] * stride_kn + offs_d[None, :] * stride_kk,
                    mask=mask_n[:, None], other=0.0)  # (BLOCK_N, HEAD_DIM), shared by the group
        qk = tl.dot(q, tl.trans(k)) * qk_scale  # (BLOCK_G, BLOCK_N)
        qk = tl.where(mask_n[None, :], qk, float("-inf"))
        m_ij = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_ij[:, None])
        alpha = tl.math.exp2(m_i - m_ij)
        v = tl.load(v_base + offs_n[:, None] * stride_vn + offs_d[None, :] * stride_vk,
                    mask=mask_n[:, None], other=0.0)  # (BLOCK_N, HEAD_DIM)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        m_i = m_ij
    parts = (off_z * H_KV * GROUP + off_h * GROUP + offs_g) * NUM_SPLITS + split  # (BLOCK_G,) rows of the partials
    tl.store(o_part_ptr + parts[:, None] * HEAD_DIM + offs_d[None, :], acc / l_i[:, None], mask=mask_g[:, None])
    tl.store(lse_part_ptr + parts, m_i + tl.math.log2(l_i), mask=mask_g)
    ### END SOLUTION


@triton.jit
def _attn_decode_merge(
    o_part_ptr, lse_part_ptr,  # what _attn_decode_split stored
    o_ptr, lse_ptr,  # o: (B, H_q, D) float16; lse: (B, H_q) float32, contiguous
    stride_oz, stride_oh, stride_ok,
    H, NUM_SPLITS,
    HEAD_DIM: tl.constexpr,
    SPLITS_POW2: tl.constexpr,  # NUM_SPLITS rounded up to a power of two
):
    # puzzle 11's merge, one program per query head
    off_hz = tl.program_id(0)
    off_z = off_hz // H
    off_h = off_hz % H
    offs_s = tl.arange(0, SPLITS_POW2)
    offs_d = tl.arange(0, HEAD_DIM)
    mask_s = offs_s < NUM_SPLITS
    lse_s = tl.load(lse_part_ptr + off_hz * NUM_SPLITS + offs_s, mask=mask_s, other=float("-inf"))
    o_s = tl.load(o_part_ptr + (off_hz * NUM_SPLITS + offs_s[:, None]) * HEAD_DIM + offs_d[None, :],
                  mask=mask_s[:, None], other=0.0)  # (SPLITS_POW2, HEAD_DIM)
    m = tl.max(lse_s, 0)
    w = tl.math.exp2(lse_s - m)
    l_sum = tl.sum(w, 0)
    o = tl.sum(w[:, None] * o_s, 0) / l_sum
    tl.store(o_ptr + off_z * stride_oz + off_h * stride_oh + offs_d * stride_ok, o.to(o_ptr.dtype.element_ty))
    tl.store(lse_ptr + off_hz, (m + tl.math.log2(l_sum)) * LN2)


def gqa_decoding(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, sm_scale: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """(o, lse) for q (B, H_q, D) and k, v (B, H_kv, N, D), float16, any strides; H_q = G * H_kv."""
    ### BEGIN SOLUTION
    B, H_kv, N, D = k.shape
    H_q = q.shape[1]
    group = H_q // H_kv
    BLOCK_N, split_size, num_stages = launch_shape(N, B * H_kv, q.device)
    num_splits = cdiv(N, split_size)
    o_part = torch.empty((B * H_q, num_splits, D), dtype=torch.float32, device=q.device)
    lse_part = torch.empty((B * H_q, num_splits), dtype=torch.float32, device=q.device)
    _attn_decode_split[(num_splits, B * H_kv)](
        q, k, v, o_part, lse_part, sm_scale * 1.4426950408889634,  # qk_scale: sm_scale * log2(e)
        *q.stride(), *k.stride(), *v.stride(),
        H_kv, N, split_size, num_splits,
        GROUP=group, BLOCK_G=max(16, next_power_of_2(group)), HEAD_DIM=D, BLOCK_N=BLOCK_N,
        num_stages=num_stages,
    )
    o = torch.empty((B, H_q, D), dtype=q.dtype, device=q.device)
    lse = torch.empty((B, H_q), dtype=torch.float32, device=q.device)
    _attn_decode_merge[(B * H_q,)](
        o_part, lse_part, o, lse, *o.stride(), H_q, num_splits,
        HEAD_DIM=D, SPLITS_POW2=next_power_of_2(num_splits),
    )
    return o, lse
    ### END SOLUTION
