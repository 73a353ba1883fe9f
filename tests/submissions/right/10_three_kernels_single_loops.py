"""Right, another style: THREE kernels (delta, dK/dV, dQ), each walk one masked loop with natural exp."""

import torch
import triton
import triton.language as tl


@triton.jit
def _delta(OUT, DO, DELTA, H, N, so0, so1, so2, so3, sd0, sd1, sd2, sd3, D: tl.constexpr, BLOCK: tl.constexpr):
    bh = tl.program_id(0).to(tl.int64)  # offsets past 2^31 elements
    b = bh // H
    h = bh % H
    cols = tl.arange(0, D)
    for r0 in range(0, N, BLOCK):  # one program per head walks its rows
        rows = r0 + tl.arange(0, BLOCK)
        ok = rows < N
        o = tl.load(OUT + b * so0 + h * so1 + rows[:, None] * so2 + cols[None, :] * so3, mask=ok[:, None], other=0.0)
        do = tl.load(DO + b * sd0 + h * sd1 + rows[:, None] * sd2 + cols[None, :] * sd3, mask=ok[:, None], other=0.0)
        tl.store(DELTA + bh * N + rows, tl.sum(o.to(tl.float32) * do.to(tl.float32), axis=1), mask=ok)


@triton.jit
def _dkdv(
    Q, K, V, DO, LSE, DELTA, DK, DV, scale, H, N,
    sq0, sq1, sq2, sq3, sk0, sk1, sk2, sk3, sv0, sv1, sv2, sv3, sd0, sd1, sd2, sd3, sl0, sl1, sl2,
    D: tl.constexpr, CAUSAL: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
):  # fmt: skip
    n0 = tl.program_id(0) * BN
    bh = tl.program_id(1).to(tl.int64)  # offsets past 2^31 elements
    b = bh // H
    h = bh % H
    cols = tl.arange(0, D)
    keys = n0 + tl.arange(0, BN)
    key_ok = keys < N
    k = tl.load(K + b * sk0 + h * sk1 + keys[:, None] * sk2 + cols[None, :] * sk3, mask=key_ok[:, None], other=0.0)
    v = tl.load(V + b * sv0 + h * sv1 + keys[:, None] * sv2 + cols[None, :] * sv3, mask=key_ok[:, None], other=0.0)
    dk = tl.zeros((BN, D), tl.float32)
    dv = tl.zeros((BN, D), tl.float32)
    start = (n0 // BM) * BM if CAUSAL else 0  # the query block holding key n0: earlier ones see no key here
    for m0 in range(start, N, BM):
        rows = m0 + tl.arange(0, BM)
        row_ok = rows < N
        q = tl.load(Q + b * sq0 + h * sq1 + rows[:, None] * sq2 + cols[None, :] * sq3, mask=row_ok[:, None], other=0.0)
        do = tl.load(
            DO + b * sd0 + h * sd1 + rows[:, None] * sd2 + cols[None, :] * sd3, mask=row_ok[:, None], other=0.0
        )
        lse = tl.load(LSE + b * sl0 + h * sl1 + rows * sl2, mask=row_ok, other=0.0)
        delta = tl.load(DELTA + bh * N + rows, mask=row_ok, other=0.0)
        keep = row_ok[:, None] & key_ok[None, :]
        if CAUSAL:
            keep = keep & (rows[:, None] >= keys[None, :])
        p = tl.where(keep, tl.exp(tl.dot(q, tl.trans(k)) * scale - lse[:, None]), 0.0)  # (BM, BN)
        dv = tl.dot(tl.trans(p).to(tl.float16), do, dv)
        ds = p * (tl.dot(do, tl.trans(v)) - delta[:, None])
        dk = tl.dot(tl.trans(ds).to(tl.float16), q, dk)
    where = bh * N * D + keys[:, None] * D + cols[None, :]  # dk and dv are contiguous
    tl.store(DK + where, (dk * scale).to(tl.float16), mask=key_ok[:, None])
    tl.store(DV + where, dv.to(tl.float16), mask=key_ok[:, None])


@triton.jit
def _dq(
    Q, K, V, DO, LSE, DELTA, DQ, scale, H, N,
    sq0, sq1, sq2, sq3, sk0, sk1, sk2, sk3, sv0, sv1, sv2, sv3, sd0, sd1, sd2, sd3, sl0, sl1, sl2,
    D: tl.constexpr, CAUSAL: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
):  # fmt: skip
    m0 = tl.program_id(0) * BM
    bh = tl.program_id(1).to(tl.int64)  # offsets past 2^31 elements
    b = bh // H
    h = bh % H
    cols = tl.arange(0, D)
    rows = m0 + tl.arange(0, BM)
    row_ok = rows < N
    q = tl.load(Q + b * sq0 + h * sq1 + rows[:, None] * sq2 + cols[None, :] * sq3, mask=row_ok[:, None], other=0.0)
    do = tl.load(DO + b * sd0 + h * sd1 + rows[:, None] * sd2 + cols[None, :] * sd3, mask=row_ok[:, None], other=0.0)
    lse = tl.load(LSE + b * sl0 + h * sl1 + rows * sl2, mask=row_ok, other=0.0)
    delta = tl.load(DELTA + bh * N + rows, mask=row_ok, other=0.0)
    dq = tl.zeros((BM, D), tl.float32)
    stop = tl.minimum(m0 + BM, N) if CAUSAL else N  # keys after this block's last row are never loaded
    for n0 in range(0, stop, BN):
        keys = n0 + tl.arange(0, BN)
        key_ok = keys < N
        k = tl.load(K + b * sk0 + h * sk1 + keys[:, None] * sk2 + cols[None, :] * sk3, mask=key_ok[:, None], other=0.0)
        v = tl.load(V + b * sv0 + h * sv1 + keys[:, None] * sv2 + cols[None, :] * sv3, mask=key_ok[:, None], other=0.0)
        keep = row_ok[:, None] & key_ok[None, :]
        if CAUSAL:
            keep = keep & (rows[:, None] >= keys[None, :])
        p = tl.where(keep, tl.exp(tl.dot(q, tl.trans(k)) * scale - lse[:, None]), 0.0)
        ds = p * (tl.dot(do, tl.trans(v)) - delta[:, None])
        dq = tl.dot(ds.to(tl.float16), k, dq)
    tl.store(DQ + bh * N * D + rows[:, None] * D + cols[None, :], (dq * scale).to(tl.float16), mask=row_ok[:, None])


def flash_attention_v2_bwd(q, k, v, o, lse, do, causal, sm_scale):
    B, H, N, D = q.shape
    dq = torch.empty((B, H, N, D), dtype=torch.float16, device=q.device)
    dk = torch.empty((B, H, N, D), dtype=torch.float16, device=q.device)
    dv = torch.empty((B, H, N, D), dtype=torch.float16, device=q.device)
    delta = torch.empty((B * H, N), dtype=torch.float32, device=q.device)
    _delta[(B * H,)](o, do, delta, H, N, *o.stride(), *do.stride(), D=D, BLOCK=32)
    strides = (*q.stride(), *k.stride(), *v.stride(), *do.stride(), *lse.stride())
    _dkdv[(triton.cdiv(N, 16), B * H)](
        q, k, v, do, lse, delta, dk, dv, sm_scale, H, N, *strides, D=D, CAUSAL=causal, BM=32, BN=16
    )
    _dq[(triton.cdiv(N, 16), B * H)](
        q, k, v, do, lse, delta, dq, sm_scale, H, N, *strides, D=D, CAUSAL=causal, BM=16, BN=32
    )
    return dq, dk, dv
