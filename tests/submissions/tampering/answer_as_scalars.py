"""Attack: the host computes the answer and hands it to the kernel as float arguments, one launch per element
(the kernel only stores the number it is given)."""

import torch
import triton
import triton.language as tl


@triton.jit
def store_kernel(out_ptr, index, value):
    tl.store(out_ptr + index, value)


def vector_add(x, y):
    out = torch.empty_like(x)
    for i, value in enumerate((x.cpu().double() + y.cpu().double()).tolist()):
        store_kernel[(1,)](out, i, float(value))
    return out
