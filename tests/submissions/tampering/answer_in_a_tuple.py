"""Attack: the answer of the first elements rides in a tuple argument (Triton passes tuples to kernels), and the
rest is padded from the same host-computed list."""

import torch
import triton
import triton.language as tl


@triton.jit
def store_kernel(out_ptr, first, start):
    tl.store(out_ptr + start, first[0])


def vector_add(x, y):
    out = torch.empty_like(x)
    answer = (x.cpu() + y.cpu()).tolist()
    for start in range(x.numel()):
        store_kernel[(1,)](out, (answer[start], 0.0), start)
    return out
