"""Wrong: dQ is summed with tl.atomic_add into a float32 buffer made by `torch.empty`, trusting the autotuner's
`reset_to_zero` to clear it; with one config the autotuner never benchmarks, so it never zeroes the buffer, and the
adds land on whatever the memory held (the grader's poison in the interpreter, where the report says nothing had been
written there; on a GPU whatever the allocator hands back, where the report says dq is wrong).

expect: values: where nothing had been written || values: dq:
"""

import torch
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BM": 16, "BN": 16})], key=["N"], reset_to_zero=["DQ32"])
@triton.jit
def _bwd_fused(
    Q, K, V, OUT, DO, LSE, DQ32, DK, DV, scale, H, N,
    sq0, sq1, sq2, sq3, sk0, sk1, sk2, sk3, sv0, sv1, sv2, sv3,
    so0, so1, so2, so3, sd0, sd1, sd2, sd3,
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
    # causal: queries before this key block see none of its keys; start at the query block holding key n0
    first = (n0 // BM) * BM if CAUSAL else 0
    for m0 in range(first, N, BM):
        rows = m0 + tl.arange(0, BM)
        row_ok = rows < N
        q = tl.load(Q + b * sq0 + h * sq1 + rows[:, None] * sq2 + cols[None, :] * sq3, mask=row_ok[:, None], other=0.0)
        do = tl.load(
            DO + b * sd0 + h * sd1 + rows[:, None] * sd2 + cols[None, :] * sd3, mask=row_ok[:, None], other=0.0
        )
        o = tl.load(
            OUT + b * so0 + h * so1 + rows[:, None] * so2 + cols[None, :] * so3, mask=row_ok[:, None], other=0.0
        )
        lse = tl.load(LSE + bh * N + rows, mask=row_ok, other=0.0)
        delta = tl.sum(do.to(tl.float32) * o.to(tl.float32), axis=1)  # rowsum(dO * O), recomputed here
        keep = row_ok[:, None] & key_ok[None, :]
        if CAUSAL:
            keep = keep & (keys[None, :] <= rows[:, None])
        p = tl.where(keep, tl.exp(tl.dot(q, tl.trans(k)) * scale - lse[:, None]), 0.0)  # (BM, BN)
        dv += tl.dot(tl.trans(p.to(tl.float16)), do)
        dp = tl.dot(do, tl.trans(v))
        ds = p * (dp - delta[:, None])
        dk += tl.dot(tl.trans(ds.to(tl.float16)), q)
        dq_part = tl.dot(ds.to(tl.float16), k) * scale  # this key block's share of dQ for these rows
        tl.atomic_add(DQ32 + bh * N * D + rows[:, None] * D + cols[None, :], dq_part, mask=row_ok[:, None])
    out = bh * N * D + keys[:, None] * D + cols[None, :]
    tl.store(DK + out, (dk * scale).to(tl.float16), mask=key_ok[:, None])
    tl.store(DV + out, dv.to(tl.float16), mask=key_ok[:, None])


def flash_attention_v2_bwd(q, k, v, o, lse, do, causal, sm_scale):
    B, H, N, D = q.shape
    dq32 = torch.empty((B, H, N, D), dtype=torch.float32, device=q.device)  # reset_to_zero clears it, it is hoped
    dk = torch.empty((B, H, N, D), dtype=torch.float16, device=q.device)
    dv = torch.empty((B, H, N, D), dtype=torch.float16, device=q.device)
    lse = lse.contiguous()
    _bwd_fused[lambda meta: (triton.cdiv(N, meta["BN"]), B * H)](
        q, k, v, o, do, lse, dq32, dk, dv, sm_scale, H, N,
        *q.stride(), *k.stride(), *v.stride(), *o.stride(), *do.stride(),
        D=D, CAUSAL=causal,
    )  # fmt: skip
    return dq32.to(torch.float16), dk, dv
