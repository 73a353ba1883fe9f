"""Puzzle 9, going further: the FlashAttention-2 forward with tensor descriptors (TMA on Hopper).

Not a puzzle: `make bench` times it beside the answer key (solutions/09_flash_attention_v2_fwd.py),
as the `variants` of puzzle 9's bench entry in puzzles.yaml, and notebook 9 explains the result.

The algorithm is the answer key's, line for line. What changes is how the tiles of Q, K, V and O
travel between global memory and the chip. The answer key computes a pointer for every element of a
tile (`base + rows * stride + cols`) and masks the rows past the sequence. Here each program describes
its (batch, head)'s matrix once, with `tl.make_tensor_descriptor(base, shape, strides, block_shape)`,
and then asks for a whole tile by its top-left corner: `desc_k.load([start_n, 0])`. On a Hopper GPU
such a load is one instruction to the Tensor Memory Accelerator (TMA), a copy engine that moves the
tile into shared memory by itself, with no address arithmetic in the program's threads; rows past the
end of the matrix come back as zeros, and a store drops them.

Descriptors need the last dimension to be contiguous and every other stride to be a multiple of 16
bytes: other layouts are copied with `.contiguous()` first. A descriptor made inside a kernel lives in
a small scratch buffer, which Triton asks for through `triton.set_allocator` (set below, once).
"""

import os

import torch
import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)  # log2(e): exp(x) == exp2(x * LOG2E)
LN2 = tl.constexpr(0.6931471805599453)  # ln(2): turns a base-2 logarithm into a natural one

if os.environ.get("TRITON_INTERPRET") == "1":
    CONFIGS = [triton.Config({"BLOCK_M": 32, "BLOCK_N": 16}, num_warps=4, num_stages=1)]
else:
    # 4 warps on 128 x 64 tiles at D=128 and 8 warps at D=64 were the fastest measured (bench/tuning.md); the
    # last config turns on warp specialisation, which only the one-loop path without a mask uses
    CONFIGS = [
        triton.Config({"BLOCK_M": BM, "BLOCK_N": BN, "WARP_SPECIALIZE": ws}, num_warps=w, num_stages=s)
        for BM, BN, w, s, ws in [(128, 64, 8, 3, False), (128, 64, 4, 2, False), (128, 128, 4, 3, False),
                                 (128, 64, 8, 4, False), (128, 128, 8, 3, False), (128, 128, 4, 2, True)]
    ]


def prune_configs(configs: list, named_args: dict, **kwargs) -> list:
    """Short sequences take the first config: tuning them would cost more than it saves."""
    n_ctx = {**named_args, **kwargs}["N_CTX"]
    return configs if n_ctx >= 4096 else configs[:1]


@triton.jit
def _attn_fwd_inner(
    acc, l_i, m_i, q,
    desc_k, desc_v,  # descriptors of this (batch, head)'s K and V: (N_CTX, HEAD_DIM), tiles (BLOCK_N, HEAD_DIM)
    offs_m, lo, hi, N_CTX, qk_scale,
    BLOCK_N: tl.constexpr,
    MASKED: tl.constexpr,
    CAUSAL: tl.constexpr,
    WARP_SPECIALIZE: tl.constexpr,
):
    for start_n in tl.range(lo, hi, BLOCK_N, warp_specialize=WARP_SPECIALIZE):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        k = desc_k.load([start_n, 0])  # rows past N_CTX arrive as zeros: no mask on the load
        qk = tl.dot(q, tl.trans(k))
        if MASKED:
            offs_kv = start_n + tl.arange(0, BLOCK_N)
            keep = offs_kv[None, :] < N_CTX
            if CAUSAL:
                keep = keep & (offs_m[:, None] >= offs_kv[None, :])
            qk = tl.where(keep, qk * qk_scale, float("-inf"))
            m_ij = tl.maximum(m_i, tl.max(qk, 1))
            qk = qk - m_ij[:, None]
        else:
            m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
            qk = qk * qk_scale - m_ij[:, None]
        p = tl.math.exp2(qk)
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = desc_v.load([start_n, 0])
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_ij
    return acc, l_i, m_i


@triton.autotune(configs=CONFIGS, key=["N_CTX", "HEAD_DIM", "CAUSAL", "EVEN_N"],
                 prune_configs_by={"early_config_prune": prune_configs})
@triton.jit
def _attn_fwd(
    q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr,  # q, k, v, o: (B, H, N, D), last dimension contiguous
    sm_scale,
    stride_qz, stride_qh, stride_qm,
    stride_kz, stride_kh, stride_kn,
    stride_vz, stride_vh, stride_vn,
    stride_oz, stride_oh, stride_om,
    H, N_CTX,
    HEAD_DIM: tl.constexpr,
    CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    WARP_SPECIALIZE: tl.constexpr = False,  # split the loop's work between warps (Triton 3.6: the unmasked loop only)
    EVEN_N: tl.constexpr = False,  # N_CTX is a multiple of 128 (of every BLOCK_M and BLOCK_N): no partial block
):
    tl.static_assert(BLOCK_M % BLOCK_N == 0)
    start_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    off_z = (off_hz // H).to(tl.int64)
    off_h = (off_hz % H).to(tl.int64)
    # one descriptor per matrix of this (batch, head): its shape, its strides and the tile it hands out
    desc_q = tl.make_tensor_descriptor(q_ptr + off_z * stride_qz + off_h * stride_qh, shape=[N_CTX, HEAD_DIM],
                                       strides=[stride_qm, 1], block_shape=[BLOCK_M, HEAD_DIM])
    desc_k = tl.make_tensor_descriptor(k_ptr + off_z * stride_kz + off_h * stride_kh, shape=[N_CTX, HEAD_DIM],
                                       strides=[stride_kn, 1], block_shape=[BLOCK_N, HEAD_DIM])
    desc_v = tl.make_tensor_descriptor(v_ptr + off_z * stride_vz + off_h * stride_vh, shape=[N_CTX, HEAD_DIM],
                                       strides=[stride_vn, 1], block_shape=[BLOCK_N, HEAD_DIM])
    desc_o = tl.make_tensor_descriptor(o_ptr + off_z * stride_oz + off_h * stride_oh, shape=[N_CTX, HEAD_DIM],
                                       strides=[stride_om, 1], block_shape=[BLOCK_M, HEAD_DIM])

    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    q = desc_q.load([start_m * BLOCK_M, 0])
    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    l_i = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), tl.float32)
    qk_scale = sm_scale * LOG2E

    if CAUSAL:
        diag = start_m * BLOCK_M
        acc, l_i, m_i = _attn_fwd_inner(acc, l_i, m_i, q, desc_k, desc_v, offs_m, 0, diag, N_CTX, qk_scale,
                                        BLOCK_N=BLOCK_N, MASKED=False, CAUSAL=True, WARP_SPECIALIZE=False)
        acc, l_i, m_i = _attn_fwd_inner(acc, l_i, m_i, q, desc_k, desc_v, offs_m, diag,
                                        tl.minimum(diag + BLOCK_M, N_CTX), N_CTX, qk_scale,
                                        BLOCK_N=BLOCK_N, MASKED=True, CAUSAL=True, WARP_SPECIALIZE=False)
    elif EVEN_N:
        acc, l_i, m_i = _attn_fwd_inner(acc, l_i, m_i, q, desc_k, desc_v, offs_m, 0, N_CTX, N_CTX, qk_scale,
                                        BLOCK_N=BLOCK_N, MASKED=False, CAUSAL=False, WARP_SPECIALIZE=WARP_SPECIALIZE)
    else:
        n_full = N_CTX - N_CTX % BLOCK_N
        acc, l_i, m_i = _attn_fwd_inner(acc, l_i, m_i, q, desc_k, desc_v, offs_m, 0, n_full, N_CTX, qk_scale,
                                        BLOCK_N=BLOCK_N, MASKED=False, CAUSAL=False, WARP_SPECIALIZE=False)
        acc, l_i, m_i = _attn_fwd_inner(acc, l_i, m_i, q, desc_k, desc_v, offs_m, n_full, N_CTX, N_CTX, qk_scale,
                                        BLOCK_N=BLOCK_N, MASKED=True, CAUSAL=False, WARP_SPECIALIZE=False)

    acc = acc / l_i[:, None]
    lse = (m_i + tl.math.log2(l_i)) * LN2
    tl.store(lse_ptr + off_hz * N_CTX + offs_m, lse, mask=offs_m < N_CTX)
    desc_o.store([start_m * BLOCK_M, 0], acc.to(o_ptr.dtype.element_ty))  # rows past N_CTX are dropped


def _scratch(size: int, alignment: int, stream: int | None) -> torch.Tensor:
    """Memory for the descriptors a kernel makes (Triton asks for it at each launch)."""
    return torch.empty(size, dtype=torch.int8, device="cpu" if os.environ.get("TRITON_INTERPRET") == "1" else "cuda")


def _tma_ready(t: torch.Tensor) -> torch.Tensor:
    """t itself when a descriptor can describe it (last dimension contiguous, 16-byte strides), else a copy."""
    fits = t.stride(-1) == 1 and all(s * t.element_size() % 16 == 0 for s in t.stride()[:-1])
    return t if fits and t.data_ptr() % 16 == 0 else t.contiguous()


def flash_attention_v2_fwd(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, sm_scale: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """(o, lse) of softmax(q k^T * sm_scale) v for (B, H, N, D) float16 q, k, v."""
    triton.set_allocator(_scratch)
    q, k, v = (_tma_ready(t) for t in (q, k, v))
    B, H, N, D = q.shape
    o = torch.empty((B, H, N, D), dtype=q.dtype, device=q.device)
    lse = torch.empty((B, H, N), dtype=torch.float32, device=q.device)
    grid = lambda meta: (triton.cdiv(N, meta["BLOCK_M"]), B * H)
    _attn_fwd[grid](
        q, k, v, o, lse, sm_scale,
        *q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *o.stride()[:3],
        H, N_CTX=N, HEAD_DIM=D, CAUSAL=causal, EVEN_N=N % 128 == 0,
    )
    return o, lse
