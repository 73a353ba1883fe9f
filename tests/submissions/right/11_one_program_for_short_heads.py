"""Right, another style: one program per head walks all its keys while a head is short (N < 512), with exp
instead of exp2; longer heads are split into ranges of 256 keys and merged by a second kernel (atomic-free)."""

import torch
import triton
import triton.language as tl


@triton.jit
def _walk(
    Q, K, V, O_OUT, LSE_OUT, sm_scale, H, N, SPLIT,
    sq0, sq1, sq2, sk0, sk1, sk2, sk3, sv0, sv1, sv2, sv3, so0, so1, so2, sl0, sl1,
    D: tl.constexpr, BLOCK_N: tl.constexpr,
):  # fmt: skip
    """Program (s, bh) walks keys [s * SPLIT, (s + 1) * SPLIT) of head bh; stores o and lse (natural log)
    at O_OUT + bh * so0 + s * so1 ... with the strides it is given: the final o directly when there is one split."""
    s = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)  # offsets past 2^31 elements
    z = bh // H
    h = bh % H
    offs_d = tl.arange(0, D)
    q = tl.load(Q + z * sq0 + h * sq1 + offs_d * sq2).to(tl.float32) * sm_scale
    m = float("-inf")
    total = 0.0
    acc = tl.zeros((D,), tl.float32)
    end = tl.minimum(s * SPLIT + SPLIT, N)
    for start in range(s * SPLIT, end, BLOCK_N):
        offs = start + tl.arange(0, BLOCK_N)
        keep = offs < end
        k = tl.load(K + z * sk0 + h * sk1 + offs[:, None] * sk2 + offs_d[None, :] * sk3, mask=keep[:, None], other=0.0)
        v = tl.load(V + z * sv0 + h * sv1 + offs[:, None] * sv2 + offs_d[None, :] * sv3, mask=keep[:, None], other=0.0)
        x = tl.where(keep, tl.sum(k.to(tl.float32) * q[None, :], 1), float("-inf"))
        new_m = tl.maximum(m, tl.max(x, 0))
        p = tl.exp(x - new_m)
        scale = tl.exp(m - new_m)
        total = total * scale + tl.sum(p, 0)
        acc = acc * scale + tl.sum(p[:, None] * v.to(tl.float32), 0)
        m = new_m
    tl.store(O_OUT + bh * so0 + s * so1 + offs_d * so2, (acc / total).to(O_OUT.dtype.element_ty))
    tl.store(LSE_OUT + bh * sl0 + s * sl1, m + tl.log(total))


@triton.jit
def _combine(PO, PL, OUT, LSE, H, S, so0, so1, so2, D: tl.constexpr, S_POW2: tl.constexpr):
    bh = tl.program_id(0).to(tl.int64)  # offsets past 2^31 elements
    offs_s = tl.arange(0, S_POW2)
    offs_d = tl.arange(0, D)
    lse_s = tl.load(PL + bh * S + offs_s, mask=offs_s < S, other=float("-inf"))
    o_s = tl.load(PO + (bh * S + offs_s[:, None]) * D + offs_d[None, :], mask=(offs_s < S)[:, None], other=0.0)
    top = tl.max(lse_s, 0)
    w = tl.exp(lse_s - top)
    out = tl.sum(w[:, None] * o_s, 0) / tl.sum(w, 0)
    tl.store(OUT + (bh // H) * so0 + (bh % H) * so1 + offs_d * so2, out.to(OUT.dtype.element_ty))
    tl.store(LSE + bh, top + tl.log(tl.sum(w, 0)))


def flash_decoding(q, k, v, sm_scale):
    B, H, N, D = k.shape
    o = torch.empty((B, H, D), dtype=q.dtype, device=q.device)
    lse = torch.empty((B, H), dtype=torch.float32, device=q.device)
    if N < 512:  # short: one program per head writes o and lse (contiguous, row bh) itself
        _walk[(1, B * H)](q, k, v, o, lse, sm_scale, H, N, N, *q.stride(), *k.stride(), *v.stride(),
                          D, 0, 1, 1, 0, D=D, BLOCK_N=32)  # fmt: skip
        return o, lse
    split = 256
    splits = triton.cdiv(N, split)
    part_o = torch.empty((B * H, splits, D), dtype=torch.float32, device=q.device)
    part_lse = torch.empty((B * H, splits), dtype=torch.float32, device=q.device)
    _walk[(splits, B * H)](q, k, v, part_o, part_lse, sm_scale, H, N, split, *q.stride(), *k.stride(), *v.stride(),
                           splits * D, D, 1, splits, 1, D=D, BLOCK_N=32)  # fmt: skip
    _combine[(B * H,)](part_o, part_lse, o, lse, H, splits, *o.stride(), D=D, S_POW2=triton.next_power_of_2(splits))
    return o, lse
