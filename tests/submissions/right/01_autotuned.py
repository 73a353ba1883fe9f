"""Right, in another style: @triton.autotune over several block sizes (the interpreter judges each one)."""

import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[triton.Config({"BLOCK_SIZE": 256}), triton.Config({"BLOCK_SIZE": 1024}, num_warps=8)], key=["n_elements"]
)
@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    add_kernel[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK_SIZE"]),)](x, y, out, x.numel())
    return out
