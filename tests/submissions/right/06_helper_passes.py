"""Right, another style: each of the three passes is its own @triton.jit helper, with 1024-wide blocks."""

import torch
import triton
import triton.language as tl


@triton.jit
def _pass_max(row, n, step, BLOCK: tl.constexpr):
    best = tl.full((BLOCK,), float("-inf"), tl.float32)  # a running max per lane, reduced at the end
    for j in range(0, n, BLOCK):
        idx = j + tl.arange(0, BLOCK)
        best = tl.maximum(best, tl.load(row + idx * step, mask=idx < n, other=float("-inf")))
    return tl.max(best, axis=0)


@triton.jit
def _pass_sum(row, n, step, top, BLOCK: tl.constexpr):
    acc = tl.zeros((BLOCK,), tl.float32)
    for j in range(0, n, BLOCK):
        idx = j + tl.arange(0, BLOCK)
        v = tl.load(row + idx * step, mask=idx < n, other=float("-inf"))
        acc += tl.exp(v - top)
    return tl.sum(acc, axis=0)


@triton.jit
def _pass_write(row, out, n, step, top, total, BLOCK: tl.constexpr):
    for j in range(0, n, BLOCK):
        idx = j + tl.arange(0, BLOCK)
        keep = idx < n
        v = tl.load(row + idx * step, mask=keep, other=float("-inf"))
        tl.store(out + idx, tl.exp(v - top) / total, mask=keep)


@triton.jit
def _softmax_three_passes(x_ptr, out_ptr, n, sxm, sxn, BLOCK: tl.constexpr):
    i = tl.program_id(0).to(tl.int64)
    row = x_ptr + i * sxm
    top = _pass_max(row, n, sxn, BLOCK)
    total = _pass_sum(row, n, sxn, top, BLOCK)
    _pass_write(row, out_ptr + i * n, n, sxn, top, total, BLOCK)


def softmax_blocked(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    out = torch.empty((m, n), dtype=torch.float32, device=x.device)
    _softmax_three_passes[(m,)](x, out, n, x.stride(0), x.stride(1), BLOCK=1024)
    return out
