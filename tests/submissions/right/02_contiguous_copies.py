"""Right, in another style: makes contiguous copies of the inputs and treats them as flat vectors."""

import torch
import triton
import triton.language as tl


@triton.jit
def flat_add(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


def matrix_add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    a, b = a.contiguous(), b.contiguous()
    out = torch.empty_like(a)
    flat_add[(triton.cdiv(a.numel(), 512),)](a, b, out, a.numel(), BLOCK_SIZE=512)
    return out
