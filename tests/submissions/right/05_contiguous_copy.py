"""Right, another style: the wrapper makes x contiguous with .contiguous(), so the kernel walks plain rows."""

import torch
import triton
import triton.language as tl


@triton.jit
def _row_softmax(src, dst, width, BLOCK: tl.constexpr):
    base = tl.program_id(0).to(tl.int64) * width  # both src and dst are contiguous (M, width)
    lanes = tl.arange(0, BLOCK)
    live = lanes < width
    v = tl.load(src + base + lanes, mask=live, other=float("-inf"))
    shifted = v - tl.max(v, axis=0)
    num = tl.where(live, tl.exp(shifted), 0.0)
    inv = 1.0 / tl.sum(num, axis=0)
    tl.store(dst + base + lanes, num * inv, mask=live)


def softmax(x: torch.Tensor) -> torch.Tensor:
    xc = x.contiguous()
    m, n = xc.shape
    out = torch.empty_like(xc)
    _row_softmax[(m,)](xc, out, n, BLOCK=triton.next_power_of_2(n))
    return out
