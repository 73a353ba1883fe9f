"""Attack: patch the timers (triton.testing.do_bench, torch.cuda.Event.elapsed_time, time.perf_counter) to
report a tiny time, and compute the answer on the host where nobody times it."""

import time

import torch
import triton
import triton.language as tl
import triton.testing

triton.testing.do_bench = lambda *args, **kwargs: 1e-6
torch.cuda.Event.elapsed_time = lambda self, other: 1e-6
time.perf_counter = lambda: 0.0


@triton.jit
def copy_kernel(src_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(src_ptr + offsets, mask=mask), mask=mask)


def vector_add(x, y):
    out = torch.empty_like(x)
    copy_kernel[(triton.cdiv(x.numel(), 1024),)](x + y, out, x.numel(), BLOCK_SIZE=1024)
    return out
