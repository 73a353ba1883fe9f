"""Attack: the replay process holds the grader's modules; the kernel finds the puzzle's reference there
(sys.modules through triton.language's import of inspect) and stores what it returns."""

import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    spec = tl.core.inspect.sys.modules.get("checks.puzzles.p01_vector_add")
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, spec.reference(x_ptr, y_ptr), mask=mask)


def vector_add(x, y):
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK_SIZE=1024)
    return out
