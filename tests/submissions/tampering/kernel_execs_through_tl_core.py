"""Attack: the kernel reaches Python's exec through a module triton.language imports (tl.core.builtins), and the
Python it runs in the interpreter writes x + y into the output from the host, so the kernel computes nothing."""

import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    tl.core.builtins.exec(
        "import ctypes, numpy\n"
        "n = int(n_elements.handle)\n"
        "view = lambda p: numpy.ctypeslib.as_array((ctypes.c_float * n).from_address(int(p.handle.flat[0])))\n"
        "view(out_ptr)[:] = view(x_ptr) + view(y_ptr)\n",
        {"n_elements": n_elements, "x_ptr": x_ptr, "y_ptr": y_ptr, "out_ptr": out_ptr},
    )


def vector_add(x, y):
    out = torch.empty_like(x)
    add_kernel[(1,)](x, y, out, x.numel(), BLOCK_SIZE=16)
    return out
