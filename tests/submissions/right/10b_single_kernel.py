"""Right, another style: one kernel, delta computed on the fly from each O and dO tile, natural exp, one masked loop."""

import torch
import triton
import triton.language as tl


@triton.jit
def _dkdv_one_kernel(
    Q,
    K,
    V,
    Out,
    DO,
    LSE,
    DK,
    DV,
    sm_scale,
    H,
    N,
    sqz,
    sqh,
    sqm,
    sqd,
    skz,
    skh,
    skn,
    skd,
    svz,
    svh,
    svn,
    svd,
    soz,
    soh,
    som,
    sod,
    sdoz,
    sdoh,
    sdom,
    sdod,
    slz,
    slh,
    slm,
    sdkz,
    sdkh,
    sdkn,
    sdkd,
    sdvz,
    sdvh,
    sdvn,
    sdvd,
    D: tl.constexpr,
    CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    start_n = tl.program_id(0) * BLOCK_N
    bh = tl.program_id(1)
    z = (bh // H).to(tl.int64)
    h = (bh % H).to(tl.int64)
    offs_n = start_n + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, D)
    n_ok = offs_n < N
    k = tl.load(K + z * skz + h * skh + offs_n[:, None] * skn + offs_d[None, :] * skd, mask=n_ok[:, None], other=0.0)
    v = tl.load(V + z * svz + h * svh + offs_n[:, None] * svn + offs_d[None, :] * svd, mask=n_ok[:, None], other=0.0)
    dk = tl.zeros((BLOCK_N, D), dtype=tl.float32)
    dv = tl.zeros((BLOCK_N, D), dtype=tl.float32)
    lo = (start_n // BLOCK_M) * BLOCK_M if CAUSAL else 0  # the first query block that sees any of these keys
    for start_m in range(lo, N, BLOCK_M):
        offs_m = start_m + tl.arange(0, BLOCK_M)
        m_ok = offs_m < N
        q = tl.load(
            Q + z * sqz + h * sqh + offs_m[:, None] * sqm + offs_d[None, :] * sqd, mask=m_ok[:, None], other=0.0
        )
        o = tl.load(
            Out + z * soz + h * soh + offs_m[:, None] * som + offs_d[None, :] * sod, mask=m_ok[:, None], other=0.0
        )
        do = tl.load(
            DO + z * sdoz + h * sdoh + offs_m[:, None] * sdom + offs_d[None, :] * sdod, mask=m_ok[:, None], other=0.0
        )
        lse = tl.load(LSE + z * slz + h * slh + offs_m * slm, mask=m_ok, other=0.0)
        delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), axis=1)
        s = tl.dot(q, tl.trans(k)) * sm_scale  # (BLOCK_M, BLOCK_N)
        keep = m_ok[:, None] & n_ok[None, :]
        if CAUSAL:
            keep = keep & (offs_m[:, None] >= offs_n[None, :])
        p = tl.where(keep, tl.exp(s - lse[:, None]), 0.0)
        dv += tl.dot(tl.trans(p.to(tl.float16)), do)
        dp = tl.dot(do, tl.trans(v))
        ds = p * (dp - delta[:, None])
        dk += tl.dot(tl.trans(ds.to(tl.float16)), q)
    dk = dk * sm_scale
    tl.store(
        DK + z * sdkz + h * sdkh + offs_n[:, None] * sdkn + offs_d[None, :] * sdkd,
        dk.to(tl.float16),
        mask=n_ok[:, None],
    )
    tl.store(
        DV + z * sdvz + h * sdvh + offs_n[:, None] * sdvn + offs_d[None, :] * sdvd,
        dv.to(tl.float16),
        mask=n_ok[:, None],
    )


def flash_attention_v2_bwd_dkdv(q, k, v, o, lse, do, causal, sm_scale):
    B, H, N, D = q.shape
    dk = torch.empty((B, H, N, D), dtype=torch.float16, device=q.device)
    dv = torch.empty((B, H, N, D), dtype=torch.float16, device=q.device)
    BLOCK_M, BLOCK_N = 16, 16
    _dkdv_one_kernel[(triton.cdiv(N, BLOCK_N), B * H)](
        q,
        k,
        v,
        o,
        do,
        lse,
        dk,
        dv,
        sm_scale,
        H,
        N,
        *q.stride(),
        *k.stride(),
        *v.stride(),
        *o.stride(),
        *do.stride(),
        *lse.stride(),
        *dk.stride(),
        *dv.stride(),
        D=D,
        CAUSAL=causal,
        BLOCK_M=BLOCK_M,
        BLOCK_N=BLOCK_N,
    )
    return dk, dv
