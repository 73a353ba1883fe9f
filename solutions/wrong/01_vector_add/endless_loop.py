"""Wrong: a loop in the kernel whose counter never moves (its step is a loaded 0), so it never ends.

(The loop stores on every turn: a GPU compiler may delete a loop that has no effect at all.)

expect: timeout: time limit
"""
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    acc = tl.load(x_ptr + offsets, mask=mask)
    step = tl.load(x_ptr) * 0.0  # meant to be 1.0: the counter below never reaches its bound
    i = 0.0
    while i < 1.0:
        tl.store(out_ptr + offsets, acc, mask=mask)
        i += step
    tl.store(out_ptr + offsets, acc + tl.load(y_ptr + offsets, mask=mask), mask=mask)


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK_SIZE=1024)
    return out
