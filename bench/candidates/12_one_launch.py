"""Puzzle 12's answer key in one launch: the last split of each (batch, kv head) to finish merges them all.

A candidate measured against the key (bench/host_time.py). The split kernel is the key's; after storing its
partials, each program adds one to its head's counter (`tl.atomic_add`, acquire-release), and the program that
sees the count reach NUM_SPLITS - 1 reads every split's partials and writes the output, then sets the counter back
to zero. The counters live between calls (COUNTERS = "kept"), so a call makes no fill launch, or are made
zero in each call with torch.zeros (COUNTERS = "zeros").
"""

import torch
import triton
import triton.language as tl

LN2 = tl.constexpr(0.6931471805599453)
MIN_BLOCKS = 4
COUNTERS = "kept"
_kept: dict[torch.device, torch.Tensor] = {}


def sm_count(device: torch.device) -> int:
    return torch.cuda.get_device_properties(device).multi_processor_count


SM_COUNT: dict[torch.device, int] = {}


def launch_shape(n_ctx: int, heads: int, device: torch.device) -> tuple[int, int, int]:
    if device.type == "cuda":
        sms = SM_COUNT.get(device)
        if sms is None:
            sms = SM_COUNT[device] = sm_count(device)
        block_n = 64
    else:
        block_n, sms = 16, 132
    per_sm, num_stages = (2, 3) if 4 * heads <= sms else (4, 2)
    n_blocks = triton.cdiv(n_ctx, block_n)
    splits = max(1, min(triton.cdiv(n_blocks, MIN_BLOCKS), triton.cdiv(per_sm * sms, heads)))
    return block_n, triton.cdiv(n_blocks, splits) * block_n, num_stages


def split_counters(n: int, device: torch.device) -> torch.Tensor:
    """n int32 counters at zero; each launch leaves them at zero again."""
    if COUNTERS == "zeros":
        return torch.zeros((n,), dtype=torch.int32, device=device)
    counters = _kept.get(device)
    if counters is None or counters.numel() < n:
        counters = _kept[device] = torch.zeros((max(n, 1024),), dtype=torch.int32, device=device)
    return counters


@triton.jit
def _attn_decode(
    q_ptr, k_ptr, v_ptr, o_part_ptr, lse_part_ptr, count_ptr, o_ptr, lse_ptr, qk_scale,
    stride_qz, stride_qh, stride_qk,
    stride_kz, stride_kh, stride_kn, stride_kk,
    stride_vz, stride_vh, stride_vn, stride_vk,
    stride_oz, stride_oh, stride_ok,
    H_KV, N_CTX, SPLIT_SIZE, NUM_SPLITS,
    GROUP: tl.constexpr, BLOCK_G: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr,
    SPLITS_POW2: tl.constexpr,
):  # fmt: skip
    split = tl.program_id(0)
    off_hz = tl.program_id(1)
    off_z = off_hz // H_KV
    off_h = off_hz % H_KV
    offs_g = tl.arange(0, BLOCK_G)
    offs_d = tl.arange(0, HEAD_DIM)
    mask_g = offs_g < GROUP
    q = tl.load(q_ptr + off_z * stride_qz + (off_h * GROUP + offs_g)[:, None] * stride_qh + offs_d[None, :] * stride_qk,
                mask=mask_g[:, None], other=0.0)  # fmt: skip
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
        k = tl.load(k_base + offs_n[:, None] * stride_kn + offs_d[None, :] * stride_kk, mask=mask_n[:, None], other=0.0)
        qk = tl.dot(q, tl.trans(k)) * qk_scale
        qk = tl.where(mask_n[None, :], qk, float("-inf"))
        m_ij = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_ij[:, None])
        alpha = tl.math.exp2(m_i - m_ij)
        v = tl.load(v_base + offs_n[:, None] * stride_vn + offs_d[None, :] * stride_vk, mask=mask_n[:, None], other=0.0)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        m_i = m_ij
    heads = off_z * H_KV * GROUP + off_h * GROUP + offs_g
    parts = heads * NUM_SPLITS + split
    tl.store(o_part_ptr + parts[:, None] * HEAD_DIM + offs_d[None, :], acc / l_i[:, None], mask=mask_g[:, None])
    tl.store(lse_part_ptr + parts, m_i + tl.math.log2(l_i), mask=mask_g)
    tl.debug_barrier()  # every thread's stores are issued before the count says this split is done
    if tl.atomic_add(count_ptr + off_hz, 1, sem="acq_rel") == NUM_SPLITS - 1:  # the last split: merge them all
        offs_s = tl.arange(0, SPLITS_POW2)
        mask_s = offs_s < NUM_SPLITS
        for g in tl.static_range(GROUP):
            head = off_z * H_KV * GROUP + off_h * GROUP + g
            lse_s = tl.load(lse_part_ptr + head * NUM_SPLITS + offs_s, mask=mask_s, other=float("-inf"),
                            cache_modifier=".cg")  # fmt: skip
            o_s = tl.load(o_part_ptr + (head * NUM_SPLITS + offs_s[:, None]) * HEAD_DIM + offs_d[None, :],
                          mask=mask_s[:, None], other=0.0, cache_modifier=".cg")  # fmt: skip
            m = tl.max(lse_s, 0)
            w = tl.math.exp2(lse_s - m)
            l_sum = tl.sum(w, 0)
            o = tl.sum(w[:, None] * o_s, 0) / l_sum
            tl.store(o_ptr + off_z * stride_oz + (off_h * GROUP + g) * stride_oh + offs_d * stride_ok,
                     o.to(o_ptr.dtype.element_ty))  # fmt: skip
            tl.store(lse_ptr + head, (m + tl.math.log2(l_sum)) * LN2)
        tl.store(count_ptr + off_hz, 0)  # ready for the next call


def gqa_decoding(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, sm_scale: float
) -> tuple[torch.Tensor, torch.Tensor]:
    B, H_kv, N, D = k.shape
    H_q = q.shape[1]
    group = H_q // H_kv
    BLOCK_N, split_size, num_stages = launch_shape(N, B * H_kv, q.device)
    num_splits = triton.cdiv(N, split_size)
    o_part = torch.empty((B * H_q, num_splits, D), dtype=torch.float32, device=q.device)
    lse_part = torch.empty((B * H_q, num_splits), dtype=torch.float32, device=q.device)
    o = torch.empty((B, H_q, D), dtype=q.dtype, device=q.device)
    lse = torch.empty((B, H_q), dtype=torch.float32, device=q.device)
    _attn_decode[(num_splits, B * H_kv)](
        q, k, v, o_part, lse_part, split_counters(B * H_kv, q.device), o, lse, sm_scale * 1.4426950408889634,
        *q.stride(), *k.stride(), *v.stride(), *o.stride(), H_kv, N, split_size, num_splits,
        GROUP=group, BLOCK_G=max(16, triton.next_power_of_2(group)), HEAD_DIM=D, BLOCK_N=BLOCK_N,
        SPLITS_POW2=triton.next_power_of_2(num_splits), num_stages=num_stages,
    )  # fmt: skip
    return o, lse
