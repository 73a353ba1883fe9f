"""Wrong: adds with numpy into a buffer torch allocated, then has a copy kernel move it into the output.

expect: plan_from_shapes: computed from the data
"""
import torch
import triton
import triton.language as tl


@triton.jit
def copy_kernel(src_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(src_ptr + offsets, mask=mask), mask=mask)


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    scratch = torch.empty_like(x)
    scratch.copy_(torch.from_numpy(x.cpu().numpy() + y.cpu().numpy()))  # numpy's sum, on a CPU or a GPU
    out = torch.empty_like(x)
    copy_kernel[(triton.cdiv(x.numel(), 1024),)](scratch, out, x.numel(), BLOCK_SIZE=1024)
    return out
