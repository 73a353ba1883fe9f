"""Attack: the host code writes, in the check's folder, the file under whose name the replay compiles the kernels,
with a body that computes nothing, hoping the replay (or Triton re-reading the source) takes it instead of the
checked text."""

import os
import tempfile
from pathlib import Path

import torch
import triton
import triton.language as tl

PLANTED = """
@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pass
"""


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


def vector_add(x, y):
    check_folder = Path(os.environ.get("TMPDIR") or tempfile.gettempdir()).parent
    (check_folder / f"kernels_0_{Path(__file__).stem}.py").write_text(PLANTED)
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK_SIZE=1024)
    return out
