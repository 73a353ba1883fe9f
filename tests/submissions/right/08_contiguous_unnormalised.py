"""Right, another style: .contiguous() copies of q, k, v, an unnormalised O in global memory, exp2, 16x32 tiles."""

import torch
import triton
import triton.language as tl


@triton.jit
def _fa1(q, k, v, out, acc, lsum, lmax, scale2, N, D: tl.constexpr, BQ: tl.constexpr, BKV: tl.constexpr):
    bh = tl.program_id(0).to(tl.int64)
    head = bh * N * D  # q, k, v, out and acc are contiguous (B, H, N, D): one head is N * D elements
    cols = tl.arange(0, D)
    for kv0 in range(0, N, BKV):  # outer: each K/V tile is loaded once
        kv = kv0 + tl.arange(0, BKV)
        kv_ok = kv < N
        kt = tl.load(k + head + kv[:, None] * D + cols[None, :], mask=kv_ok[:, None], other=0.0)
        vt = tl.load(v + head + kv[:, None] * D + cols[None, :], mask=kv_ok[:, None], other=0.0)
        for q0 in range(0, N, BQ):  # inner: every Q tile, its state in global memory
            rows = q0 + tl.arange(0, BQ)
            ok = rows < N
            qt = tl.load(q + head + rows[:, None] * D + cols[None, :], mask=ok[:, None], other=0.0)
            s = tl.dot(qt, tl.trans(kt)) * scale2  # base-2 scores
            s = tl.where(kv_ok[None, :], s, float("-inf"))
            m_old = tl.load(lmax + bh * N + rows, mask=ok, other=0.0)
            l_old = tl.load(lsum + bh * N + rows, mask=ok, other=0.0)
            o_old = tl.load(acc + head + rows[:, None] * D + cols[None, :], mask=ok[:, None], other=0.0)
            m_new = tl.maximum(m_old, tl.max(s, axis=1))
            p = tl.exp2(s - m_new[:, None])
            shrink = tl.exp2(m_old - m_new)  # 0 on the first K/V tile, where m_old is -inf
            l_new = l_old * shrink + tl.sum(p, axis=1)
            o_new = o_old * shrink[:, None] + tl.dot(p.to(tl.float16), vt)  # kept unnormalised
            tl.store(acc + head + rows[:, None] * D + cols[None, :], o_new, mask=ok[:, None])
            tl.store(lsum + bh * N + rows, l_new, mask=ok)
            tl.store(lmax + bh * N + rows, m_new, mask=ok)
        tl.debug_barrier()
    for q0 in range(0, N, BQ):  # divide by l once, at the end
        rows = q0 + tl.arange(0, BQ)
        ok = rows < N
        o_fin = tl.load(acc + head + rows[:, None] * D + cols[None, :], mask=ok[:, None], other=0.0)
        l_fin = tl.load(lsum + bh * N + rows, mask=ok, other=1.0)
        tl.store(out + head + rows[:, None] * D + cols[None, :], (o_fin / l_fin[:, None]).to(tl.float16),
                 mask=ok[:, None])  # fmt: skip


def flash_attention_v1(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, sm_scale: float) -> torch.Tensor:
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    B, H, N, D = q.shape
    out = torch.empty((B, H, N, D), dtype=torch.float16, device=q.device)
    acc = torch.zeros((B, H, N, D), dtype=torch.float32, device=q.device)
    lsum = torch.zeros((B, H, N), dtype=torch.float32, device=q.device)
    lmax = torch.full((B, H, N), float("-inf"), dtype=torch.float32, device=q.device)
    _fa1[(B * H,)](q, k, v, out, acc, lsum, lmax, sm_scale * 1.4426950408889634, N, D=D, BQ=16, BKV=32)
    return out
