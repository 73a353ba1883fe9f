"""Right, another style: three kernels, one per pass; the row max and row sum go through small (M,) buffers."""

import torch
import triton
import triton.language as tl


@triton.jit
def _row_max(x_ptr, m_ptr, n, sxm, sxn, BLOCK: tl.constexpr):
    i = tl.program_id(0).to(tl.int64)
    best = tl.full((BLOCK,), float("-inf"), tl.float32)
    for j in range(0, n, BLOCK):
        idx = j + tl.arange(0, BLOCK)
        best = tl.maximum(best, tl.load(x_ptr + i * sxm + idx * sxn, mask=idx < n, other=float("-inf")))
    tl.store(m_ptr + i, tl.max(best, axis=0))


@triton.jit
def _row_sum(x_ptr, m_ptr, s_ptr, n, sxm, sxn, BLOCK: tl.constexpr):
    i = tl.program_id(0).to(tl.int64)
    top = tl.load(m_ptr + i)
    acc = tl.zeros((BLOCK,), tl.float32)
    for j in range(0, n, BLOCK):
        idx = j + tl.arange(0, BLOCK)
        acc += tl.exp(tl.load(x_ptr + i * sxm + idx * sxn, mask=idx < n, other=float("-inf")) - top)
    tl.store(s_ptr + i, tl.sum(acc, axis=0))


@triton.jit
def _normalise(x_ptr, m_ptr, s_ptr, out_ptr, n, sxm, sxn, BLOCK: tl.constexpr):
    i = tl.program_id(0).to(tl.int64)
    top = tl.load(m_ptr + i)
    inv = 1.0 / tl.load(s_ptr + i)
    for j in range(0, n, BLOCK):
        idx = j + tl.arange(0, BLOCK)
        keep = idx < n
        v = tl.load(x_ptr + i * sxm + idx * sxn, mask=keep, other=float("-inf"))
        tl.store(out_ptr + i * n + idx, tl.exp(v - top) * inv, mask=keep)


def softmax_blocked(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    out = torch.empty((m, n), dtype=torch.float32, device=x.device)
    row_max = torch.empty((m,), dtype=torch.float32, device=x.device)
    row_sum = torch.empty((m,), dtype=torch.float32, device=x.device)
    args = (n, x.stride(0), x.stride(1))
    _row_max[(m,)](x, row_max, *args, BLOCK=2048)
    _row_sum[(m,)](x, row_max, row_sum, *args, BLOCK=2048)
    _normalise[(m,)](x, row_max, row_sum, out, *args, BLOCK=2048)
    return out
