"""Wrong: counts its calls in a tensor kept between calls and adds the count to every sum, so that only the first
call is right.

expect: kept_state: as the calls before it left it
"""

import torch
import triton
import triton.language as tl

CALLS = torch.zeros(1, device="cuda" if torch.cuda.is_available() else "cpu")


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, calls_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y + tl.load(calls_ptr), mask=mask)


@triton.jit
def count_call(calls_ptr):
    tl.store(calls_ptr, tl.load(calls_ptr) + 1.0)


def vector_add(x, y):
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, CALLS, x.numel(), BLOCK=1024)
    count_call[(1,)](CALLS)
    return out
