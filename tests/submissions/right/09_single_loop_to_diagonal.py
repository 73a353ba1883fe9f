"""Right, another style: one masked loop whose upper bound stops at the diagonal; grid (B * H, query blocks); exp."""

import torch
import triton
import triton.language as tl


@triton.jit
def _fa2_single_loop(
    Q, K, V, OUT, L, scale, H, N,
    sq0, sq1, sq2, sq3, sk0, sk1, sk2, sk3, sv0, sv1, sv2, sv3, so0, so1, so2, so3,
    D: tl.constexpr, CAUSAL: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
):  # fmt: skip
    bh = tl.program_id(0).to(tl.int64)  # offsets past 2^31 elements
    qb = tl.program_id(1)
    b = bh // H
    h = bh % H
    rows = qb * BM + tl.arange(0, BM)
    cols = tl.arange(0, D)
    live = rows < N
    q = tl.load(Q + b * sq0 + h * sq1 + rows[:, None] * sq2 + cols[None, :] * sq3, mask=live[:, None], other=0.0)
    m = tl.full((BM,), float("-inf"), tl.float32)
    s_sum = tl.zeros((BM,), tl.float32)
    acc = tl.zeros((BM, D), tl.float32)
    if CAUSAL:
        end = tl.minimum((qb + 1) * BM, N)  # no key after this block's last row is ever loaded
    else:
        end = N
    for n0 in range(0, end, BN):
        keys = n0 + tl.arange(0, BN)
        kv_live = keys < N
        k = tl.load(K + b * sk0 + h * sk1 + keys[:, None] * sk2 + cols[None, :] * sk3, mask=kv_live[:, None], other=0.0)
        v = tl.load(V + b * sv0 + h * sv1 + keys[:, None] * sv2 + cols[None, :] * sv3, mask=kv_live[:, None], other=0.0)
        allowed = kv_live[None, :]
        if CAUSAL:
            allowed = allowed & (keys[None, :] <= rows[:, None])
        s = tl.where(allowed, tl.dot(q, tl.trans(k)) * scale, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, axis=1))
        p = tl.exp(s - m_new[:, None])
        corr = tl.exp(m - m_new)
        s_sum = s_sum * corr + tl.sum(p, axis=1)
        acc = acc * corr[:, None] + tl.dot(p.to(tl.float16), v)
        m = m_new
    o = acc / s_sum[:, None]
    tl.store(OUT + b * so0 + h * so1 + rows[:, None] * so2 + cols[None, :] * so3, o.to(tl.float16), mask=live[:, None])
    tl.store(L + bh * N + rows, m + tl.log(s_sum), mask=live)


def flash_attention_v2_fwd(q, k, v, causal, sm_scale):
    B, H, N, D = q.shape
    o = torch.empty((B, H, N, D), dtype=torch.float16, device=q.device)
    lse = torch.empty((B, H, N), dtype=torch.float32, device=q.device)
    BM, BN = 32, 64
    _fa2_single_loop[(B * H, triton.cdiv(N, BM))](
        q, k, v, o, lse, sm_scale, H, N, *q.stride(), *k.stride(), *v.stride(), *o.stride(),
        D=D, CAUSAL=causal, BM=BM, BN=BN,
    )  # fmt: skip
    return o, lse
