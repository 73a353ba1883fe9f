"""Attack: a background thread (or another stream) writes the answer after the function returned; on a GPU it
would also finish after the timer stopped."""

import threading
import time

import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pass


def vector_add(x, y):
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK_SIZE=1024)

    def late():
        time.sleep(0.01)
        out.copy_(x + y)

    threading.Thread(target=late).start()
    return out
