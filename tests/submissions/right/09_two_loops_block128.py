"""Right, another style: the notebook's 128 x 64 tiles, causal as two inline loops (off-diagonal, then diagonal)."""

import torch
import triton
import triton.language as tl


@triton.jit
def _fwd(
    Q, K, V, OUT, LSE, qk_scale, H, N,
    sk0, sk1, sk2, sk3, sv0, sv1, sv2, sv3, so0, so1, so2, so3,
    D: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):  # fmt: skip
    start = tl.program_id(0) * BLOCK_M
    bh = tl.program_id(1).to(tl.int64)  # offsets past 2^31 elements
    z = bh // H
    h = bh % H
    offs_m = start + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, D)
    q = tl.load(Q + bh * N * D + offs_m[:, None] * D + offs_d[None, :], mask=offs_m[:, None] < N, other=0.0)
    k_base = K + z * sk0 + h * sk1
    v_base = V + z * sv0 + h * sv1
    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    l_i = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, D), tl.float32)

    # loop 1: key blocks that need no causal mask (all of them but the ragged tail when not causal)
    if CAUSAL:
        full_end = start
    else:
        full_end = N - N % BLOCK_N
    for n0 in range(0, full_end, BLOCK_N):
        offs_n = n0 + tl.arange(0, BLOCK_N)
        k = tl.load(k_base + offs_n[:, None] * sk2 + offs_d[None, :] * sk3)
        v = tl.load(v_base + offs_n[:, None] * sv2 + offs_d[None, :] * sv3)
        s = tl.dot(q, tl.trans(k)) * qk_scale
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.exp2(s - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(tl.float16), v)
        m_i = m_new

    # loop 2: the blocks the diagonal (or the end of the sequence) cuts, with the mask
    if CAUSAL:
        tail_end = tl.minimum(start + BLOCK_M, N)
    else:
        tail_end = N
    for n0 in range(full_end, tail_end, BLOCK_N):
        offs_n = n0 + tl.arange(0, BLOCK_N)
        ok_n = offs_n < N
        k = tl.load(k_base + offs_n[:, None] * sk2 + offs_d[None, :] * sk3, mask=ok_n[:, None], other=0.0)
        v = tl.load(v_base + offs_n[:, None] * sv2 + offs_d[None, :] * sv3, mask=ok_n[:, None], other=0.0)
        keep = ok_n[None, :]
        if CAUSAL:
            keep = keep & (offs_n[None, :] <= offs_m[:, None])
        s = tl.where(keep, tl.dot(q, tl.trans(k)) * qk_scale, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.exp2(s - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(tl.float16), v)
        m_i = m_new

    row_ok = offs_m < N
    tl.store(OUT + z * so0 + h * so1 + offs_m[:, None] * so2 + offs_d[None, :] * so3,
             (acc / l_i[:, None]).to(tl.float16), mask=row_ok[:, None])  # fmt: skip
    tl.store(LSE + bh * N + offs_m, (m_i + tl.log2(l_i)) * 0.6931471805599453, mask=row_ok)


def flash_attention_v2_fwd(q, k, v, causal, sm_scale):
    qc = q.contiguous()  # the kernel indexes q as a contiguous (B * H, N, D) block
    B, H, N, D = qc.shape
    o = torch.empty_like(qc)
    lse = torch.empty((B, H, N), dtype=torch.float32, device=q.device)
    BLOCK_M, BLOCK_N = 128, 64
    grid = (triton.cdiv(N, BLOCK_M), B * H)
    _fwd[grid](
        qc, k, v, o, lse, sm_scale * 1.4426950408889634, H, N, *k.stride(), *v.stride(), *o.stride(),
        D=D, CAUSAL=causal, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
    )  # fmt: skip
    return o, lse
