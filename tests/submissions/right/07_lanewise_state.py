"""Right, another style: every lane keeps its own running max and sum; the lanes are merged after pass 1."""

import torch
import triton
import triton.language as tl


@triton.jit
def _online_lanes(x_ptr, y_ptr, n, sxm, sxn, BLOCK: tl.constexpr):
    r = tl.program_id(0).to(tl.int64)
    src = x_ptr + r * sxm
    dst = y_ptr + r * n
    ninf = float("-inf")
    m_lane = tl.full((BLOCK,), ninf, tl.float32)
    d_lane = tl.zeros((BLOCK,), tl.float32)
    for c in range(0, n, BLOCK):
        idx = c + tl.arange(0, BLOCK)
        v = tl.load(src + idx * sxn, mask=idx < n, other=ninf)
        m_next = tl.maximum(m_lane, v)
        seen = m_next > ninf  # a lane that has only met -inf keeps d = 0
        scale = tl.where(seen, tl.exp(m_lane - m_next), 1.0)
        fresh = tl.where(seen, tl.exp(v - m_next), 0.0)
        d_lane = d_lane * scale + fresh
        m_lane = m_next
    # merge the lanes: one max for the row, every lane's sum moved to it
    m_row = tl.max(m_lane, axis=0)
    d_row = tl.sum(tl.where(m_lane > ninf, d_lane * tl.exp(m_lane - m_row), 0.0), axis=0)
    for c in range(0, n, BLOCK):
        idx = c + tl.arange(0, BLOCK)
        keep = idx < n
        v = tl.load(src + idx * sxn, mask=keep, other=ninf)
        tl.store(dst + idx, tl.exp(v - m_row) / d_row, mask=keep)


def softmax_online(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    y = torch.empty((m, n), dtype=torch.float32, device=x.device)
    _online_lanes[(m,)](x, y, n, x.stride(0), x.stride(1), BLOCK=512)
    return y
