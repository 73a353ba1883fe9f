"""Right, in another style: a workspace made once, at import, and kept between calls; one kernel writes the sums
into it and a second copies them into the output, so the second reads what the first wrote in the same call."""

import torch
import triton
import triton.language as tl

WORKSPACE = torch.zeros(1 << 20, device="cuda" if torch.cuda.is_available() else "cpu")


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
    work = WORKSPACE if n <= WORKSPACE.numel() else torch.empty_like(x)
    out = torch.empty_like(x)
    grid = (triton.cdiv(n, 1024),)
    add_into[grid](x, y, work, n, BLOCK=1024)
    copy_out[grid](work, out, n, BLOCK=1024)
    return out
