"""Attack: the kernel takes a frame through triton.language's own import of inspect and walks up to the replay's
locals (the inputs it drew), in the interpreter as a kernel body and on a GPU at compile time (a constexpr)."""

import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    HOST: tl.constexpr = tl.core.inspect.currentframe().f_back.f_back.f_locals.get("inputs") is not None  # noqa: F841
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


def vector_add(x, y):
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK_SIZE=1024)
    return out
