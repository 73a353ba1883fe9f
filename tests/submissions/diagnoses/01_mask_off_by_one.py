"""Wrong: the mask is offsets <= n_elements, which lets one element past the end through."""

import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(
    x_ptr,  # pointer to the first element of x
    y_ptr,  # pointer to the first element of y
    out_ptr,  # pointer to the first element of the output
    n_elements,  # how many elements the vectors have
    BLOCK_SIZE: tl.constexpr,  # elements per program; a compile-time constant (a power of two)
):
    # Many copies of this function run at once, one per "program". Each asks which one it is ...
    pid = tl.program_id(axis=0)
    # ... and takes the block of BLOCK_SIZE consecutive elements that starts at pid * BLOCK_SIZE.
    block_start = pid * BLOCK_SIZE
    offsets = block_start + tl.arange(0, BLOCK_SIZE)
    # The last block may run past the end of the vectors: the mask switches those lanes off.
    mask = offsets <= n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """x + y for 1-D float32 tensors of the same length."""
    out = torch.empty_like(x)
    n_elements = out.numel()
    # One program per block, rounded up so the last, partial block is covered too.
    grid = lambda meta: (triton.cdiv(n_elements, meta["BLOCK_SIZE"]),)
    add_kernel[grid](x, y, out, n_elements, BLOCK_SIZE=1024)
    return out
