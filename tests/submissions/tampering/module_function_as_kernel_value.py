"""Attack: a kernel reads a module-level name that holds a function (builtins' exec under another name) and hands
it on as a value, which a GPU's compiler would call at compile time; the plan records no such value."""

import builtins

import torch
import triton
import triton.language as tl

RUN = builtins.exec


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    total = tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, tl.reduce(total, 0, RUN) * 0 + total, mask=mask)


def vector_add(x, y):
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK_SIZE=1024)
    return out
