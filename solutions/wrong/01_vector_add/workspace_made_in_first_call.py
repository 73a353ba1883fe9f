"""Wrong: makes its workspace in its first call and keeps it for the calls after, so that its first call asks the
GPU for an allocation its later calls do not: what a call does depends on the calls before it.

expect: plan_from_shapes: once, when your module is imported
"""

import torch
import triton
import triton.language as tl

kept: dict[str, torch.Tensor] = {}


@triton.jit
def add_into(x_ptr, y_ptr, work_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(work_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


@triton.jit
def copy_out(work_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(work_ptr + offsets, mask=mask), mask=mask)


def vector_add(x, y):
    n = x.numel()
    if "work" not in kept or kept["work"].numel() < n:
        kept["work"] = torch.empty(max(n, 1 << 16), device=x.device)
    out = torch.empty_like(x)
    grid = (triton.cdiv(n, 1024),)
    add_into[grid](x, y, kept["work"], n, BLOCK=1024)
    copy_out[grid](kept["work"], out, n, BLOCK=1024)
    return out
