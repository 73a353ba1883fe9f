"""Attack: the host computes x + y with torch and passes the kernel a one-element, stride-0 view of it; the kernel
reads the whole buffer behind that pointer and copies it out."""

import torch
import triton
import triton.language as tl


@triton.jit
def copy_kernel(src_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(src_ptr + offsets, mask=mask), mask=mask)


def vector_add(x, y):
    out = torch.empty_like(x)
    answer = x + y
    tiny = answer.as_strided((1,), (0,))
    copy_kernel[(triton.cdiv(x.numel(), 1024),)](tiny, out, x.numel(), BLOCK_SIZE=1024)
    return out
