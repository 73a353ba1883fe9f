"""Attack: a pre-run hook on the kernel writes the answer into out before the (empty) kernel runs."""

import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pass


def vector_add(x, y):
    out = torch.empty_like(x)
    add_kernel.add_pre_run_hook(
        lambda *args, **kwargs: out.cpu().numpy().__setitem__(slice(None), (x + y).cpu().numpy())
    )
    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK_SIZE=1024)
    return out
