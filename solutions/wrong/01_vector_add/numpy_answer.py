"""Wrong: launches a kernel, but returns an answer numpy computed (torch never sees the arithmetic).

expect: plan_from_shapes: computed from the data
"""
import torch
import triton
import triton.language as tl


@triton.jit
def copy_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask), mask=mask)


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    scratch = torch.empty_like(x)
    copy_kernel[(triton.cdiv(x.numel(), 1024),)](x, scratch, x.numel(), BLOCK_SIZE=1024)
    return torch.from_numpy(x.cpu().numpy() + y.cpu().numpy()).to(x.device)
