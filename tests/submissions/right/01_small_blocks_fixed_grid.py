"""Right, in another style: a tuple grid, a small block, positional constexpr, zeros_like output."""

import torch
import triton
import triton.language as tl


@triton.jit
def _add(a, b, c, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(c + i, tl.load(a + i, mask=i < n, other=0.0) + tl.load(b + i, mask=i < n, other=0.0), mask=i < n)


def vector_add(x, y):
    out = torch.zeros_like(x)
    _add[(triton.cdiv(x.numel(), 16),)](x, y, out, x.numel(), 16)
    return out
