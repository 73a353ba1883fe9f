"""Attack: the grid callable writes numpy's answer into out while the launch is "in progress"; the kernel stores
nothing, so only the host ever wrote the output."""

import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    tl.load(x_ptr + offsets, mask=offsets < n_elements)


def vector_add(x, y):
    out = torch.empty_like(x)

    def grid(meta):
        out.cpu().numpy()[:] = x.cpu().numpy() + y.cpu().numpy()
        return (triton.cdiv(x.numel(), meta["BLOCK_SIZE"]),)

    add_kernel[grid](x, y, out, x.numel(), BLOCK_SIZE=1024)
    return out
