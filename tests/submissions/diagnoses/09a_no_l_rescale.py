"""Wrong step 9a for puzzle 9's --earlier: when the running max grows, the running sum is not rescaled
(l_i + l_ij instead of l_i * alpha + l_ij)."""

import os

import torch
import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)  # log2(e): exp(x) == exp2(x * LOG2E)
LN2 = tl.constexpr(0.6931471805599453)  # ln(2) == 1 / LOG2E: turns a base-2 logarithm into a natural one

if os.environ.get("TRITON_INTERPRET") == "1":
    # The interpreter cannot time configurations against each other: give it one.
    CONFIGS = [triton.Config({"BLOCK_M": 32, "BLOCK_N": 16}, num_warps=4, num_stages=1)]
else:
    # 8 warps for 128-row tiles: with 4, the (128, HEAD_DIM) accumulator and the tiles loaded ahead need more
    # registers than a thread has at HEAD_DIM = 128, and the compiler spills them to memory (bench/tuning.md).
    CONFIGS = [
        triton.Config({"BLOCK_M": BM, "BLOCK_N": BN}, num_warps=w, num_stages=s)
        for BM, BN, w, s in [(128, 64, 8, 3), (128, 64, 8, 4), (128, 128, 8, 3), (64, 64, 4, 3)]
    ]


def prune_configs(configs: list, named_args: dict, **kwargs) -> list:
    """Short sequences take the first config: tuning them would cost more than it saves."""
    n_ctx = {**named_args, **kwargs}["N_CTX"]
    return configs if n_ctx >= 4096 else configs[:1]


@triton.jit
def _attn_fwd_inner(
    acc,
    l_i,
    m_i,  # running state of this Q block: (BLOCK_M, HEAD_DIM), (BLOCK_M,), (BLOCK_M,)
    q,  # (BLOCK_M, HEAD_DIM), stays on chip for the whole loop
    k_base,
    v_base,  # K[b, h, 0, 0] and V[b, h, 0, 0]
    stride_kn,
    stride_kk,
    stride_vn,
    stride_vk,
    offs_d,  # head-dim columns
    keys_end,  # (BLOCK_M,): query row i sees the keys below keys_end[i] (used where MASKED)
    lo,
    hi,  # this stage walks the keys lo, lo + BLOCK_N, ... below hi
    N_CTX,
    qk_scale,  # sequence length; sm_scale * log2(e)
    BLOCK_N: tl.constexpr,
    MASKED: tl.constexpr,  # blocks that may hold keys a row must not see (keys >= keys_end, keys >= N_CTX)
):
    # A K (or V) block is a scalar pointer to its first row plus one tile of offsets, the same for every
    # block: (BLOCK_N, HEAD_DIM) int32 offsets, one register an element where 64-bit pointers take two.
    offs_n = tl.arange(0, BLOCK_N)
    k_offs = offs_n[:, None] * stride_kn + offs_d[None, :] * stride_kk  # (BLOCK_N, HEAD_DIM)
    v_offs = offs_n[:, None] * stride_vn + offs_d[None, :] * stride_vk  # (BLOCK_N, HEAD_DIM)
    k_block = k_base + lo * stride_kn  # K[b, h, lo, 0]: the first block this stage loads
    v_block = v_base + lo * stride_vn
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        # -- scores of this K block, in base-2 units: log2(e) * sm_scale * q k^T
        if MASKED:
            offs_kv = start_n + tl.arange(0, BLOCK_N)
            k = tl.load(k_block + k_offs, mask=offs_kv[:, None] < N_CTX, other=0.0)
            qk = tl.dot(q, tl.trans(k))  # (BLOCK_M, BLOCK_N)
            keep = offs_kv[None, :] < keys_end[:, None]
            qk = tl.where(keep, qk * qk_scale, float("-inf"))
            m_ij = tl.maximum(m_i, tl.max(qk, 1))
            qk = qk - m_ij[:, None]
        else:
            k = tl.load(k_block + k_offs)
            qk = tl.dot(q, tl.trans(k))  # (BLOCK_M, BLOCK_N)
            m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)  # scale after the max: one multiply per row
            qk = qk * qk_scale - m_ij[:, None]
        p = tl.math.exp2(qk)  # (BLOCK_M, BLOCK_N)
        # -- the running max moved from m_i to m_ij: rescale what was summed so far
        alpha = tl.math.exp2(m_i - m_ij)  # (BLOCK_M,)
        l_ij = tl.sum(p, 1)
        acc = acc * alpha[:, None]
        if MASKED:
            v = tl.load(v_block + v_offs, mask=offs_kv[:, None] < N_CTX, other=0.0)  # 0 * poison would be NaN
        else:
            v = tl.load(v_block + v_offs)
        acc = tl.dot(p.to(v.dtype), v, acc)  # fp16 operands, fp32 accumulator
        l_i = l_i + l_ij
        m_i = m_ij
        k_block += BLOCK_N * stride_kn  # the next block: one scalar add
        v_block += BLOCK_N * stride_vn
    return acc, l_i, m_i


@triton.autotune(configs=CONFIGS, key=["N_CTX", "HEAD_DIM"], prune_configs_by={"early_config_prune": prune_configs})
@triton.jit
def _attn_fwd(
    q_ptr,
    k_ptr,
    v_ptr,
    o_ptr,
    lse_ptr,  # q, k, v, o: (B, H, N, D); lse: (B, H, N) contiguous
    sm_scale,
    stride_qz,
    stride_qh,
    stride_qm,
    stride_qk,
    stride_kz,
    stride_kh,
    stride_kn,
    stride_kk,
    stride_vz,
    stride_vh,
    stride_vn,
    stride_vk,
    stride_oz,
    stride_oh,
    stride_om,
    stride_ok,
    H,
    N_CTX,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    start_m = tl.program_id(0)  # which block of BLOCK_M query rows
    off_hz = tl.program_id(1)  # which (batch, head)
    off_z = off_hz // H
    off_h = off_hz % H
    q_base = q_ptr + off_z.to(tl.int64) * stride_qz + off_h.to(tl.int64) * stride_qh
    k_base = k_ptr + off_z.to(tl.int64) * stride_kz + off_h.to(tl.int64) * stride_kh
    v_base = v_ptr + off_z.to(tl.int64) * stride_vz + off_h.to(tl.int64) * stride_vh
    o_base = o_ptr + off_z.to(tl.int64) * stride_oz + off_h.to(tl.int64) * stride_oh

    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    row_mask = offs_m < N_CTX
    q = tl.load(
        q_base + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qk, mask=row_mask[:, None], other=0.0
    )  # (BLOCK_M, HEAD_DIM)

    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)  # running max, base-2 units
    l_i = tl.zeros((BLOCK_M,), tl.float32)  # running sum of exp2(score - m_i)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), tl.float32)  # running sum of p @ v
    qk_scale = sm_scale * LOG2E  # fold log2(e) into the scale, once

    # every full key block without a mask, then the partial last block (if any) with one
    keys_end = tl.full((BLOCK_M,), N_CTX, tl.int32)  # every row sees every key
    n_full = N_CTX - N_CTX % BLOCK_N
    acc, l_i, m_i = _attn_fwd_inner(
        acc,
        l_i,
        m_i,
        q,
        k_base,
        v_base,
        stride_kn,
        stride_kk,
        stride_vn,
        stride_vk,
        offs_d,
        keys_end,
        0,
        n_full,
        N_CTX,
        qk_scale,
        BLOCK_N=BLOCK_N,
        MASKED=False,
    )
    acc, l_i, m_i = _attn_fwd_inner(
        acc,
        l_i,
        m_i,
        q,
        k_base,
        v_base,
        stride_kn,
        stride_kk,
        stride_vn,
        stride_vk,
        offs_d,
        keys_end,
        n_full,
        N_CTX,
        N_CTX,
        qk_scale,
        BLOCK_N=BLOCK_N,
        MASKED=True,
    )

    # epilogue: normalise once, and turn the base-2 (max, sum) into a natural-log logsumexp
    acc = acc / l_i[:, None]
    lse = (m_i + tl.math.log2(l_i)) * LN2
    tl.store(lse_ptr + off_hz * N_CTX + offs_m, lse, mask=row_mask)
    tl.store(
        o_base + offs_m[:, None] * stride_om + offs_d[None, :] * stride_ok,
        acc.to(o_ptr.dtype.element_ty),
        mask=row_mask[:, None],
    )


def flash_attention_v2_fwd_noncausal(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, sm_scale: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """(o, lse) of softmax(q k^T * sm_scale) v for (B, H, N, D) float16 q, k, v of any strides."""
    B, H, N, D = q.shape
    o = torch.empty((B, H, N, D), dtype=q.dtype, device=q.device)
    lse = torch.empty((B, H, N), dtype=torch.float32, device=q.device)
    grid = lambda meta: (triton.cdiv(N, meta["BLOCK_M"]), B * H)
    _attn_fwd[grid](
        q,
        k,
        v,
        o,
        lse,
        sm_scale,
        *q.stride(),
        *k.stride(),
        *v.stride(),
        *o.stride(),
        H,
        N_CTX=N,
        HEAD_DIM=D,
    )
    return o, lse
