"""A right answer that, through a library's helper (the audit hook lets a library start processes), leaves a
detached process behind that outlives the grading process: only the grader's sealing can catch it."""

import sys

import torch
import triton
import triton.language as tl
from torch.utils.collect_env import run

LINGER = "import os, time; os.setsid(); time.sleep(60)"  # in a session of its own, out of the grading process's
run(f"{sys.executable} -c '{LINGER}' </dev/null >/dev/null 2>&1 &")


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


def vector_add(x, y):
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK_SIZE=1024)
    return out
