"""Attack: at compile time on a GPU (and as the body runs in the interpreter) the kernel patches the replay's
Performer for every later launch, timing included, through setattr reached by triton.language's imports."""

import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    PATCHED: tl.constexpr = tl.core.builtins.setattr(  # noqa: F841
        tl.core.inspect.sys.modules["checks.engine.replay.perform"].Performer, "fill_empty", False
    )
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


def vector_add(x, y):
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK_SIZE=1024)
    return out
