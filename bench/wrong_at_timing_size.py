"""A puzzle-1 kernel that is right on every graded case and wrong at the timing size (GPU check of the grader).

Puzzle 1's answer key, except that from 2^27 elements on, 1000 elements in the middle of the output are never
written. The graded cases go up to 16777217 elements and the timing size is 2^28, so only the grader's comparison
of the answers at the timing size can reject it:

    python3 -m checks 1 --file bench/wrong_at_timing_size.py    # on a GPU: "wrong at the timing size"

(`bench/results/make-solutions-gpu.md` records a run.)
"""

import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(
    x_ptr,  # pointer to the first element of x
    y_ptr,  # pointer to the first element of y
    out_ptr,  # pointer to the first element of the output
    n_elements,  # how many elements the vectors have
    BLOCK_SIZE: tl.constexpr,  # elements per program; a compile-time constant (a power of two)
):
    ### BEGIN SOLUTION
    # Many copies of this function run at once, one per "program". Each asks which one it is ...
    pid = tl.program_id(axis=0)
    # ... and takes the block of BLOCK_SIZE consecutive elements that starts at pid * BLOCK_SIZE.
    block_start = pid * BLOCK_SIZE
    offsets = block_start + tl.arange(0, BLOCK_SIZE)
    # The last block may run past the end of the vectors: the mask switches those lanes off.
    skip = (n_elements >= 2**27) & (offsets >= n_elements // 2) & (offsets < n_elements // 2 + 1000)
    mask = (offsets < n_elements) & ~skip  # at a large size, 1000 elements are never written
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)
    ### END SOLUTION


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """x + y for 1-D float32 tensors of the same length."""
    ### BEGIN SOLUTION
    out = torch.empty_like(x) if x.numel() < 2**20 else torch.full_like(x, 7.0)
    n_elements = out.numel()
    # One program per block, rounded up so the last, partial block is covered too.
    grid = lambda meta: (triton.cdiv(n_elements, meta["BLOCK_SIZE"]),)
    add_kernel[grid](x, y, out, n_elements, BLOCK_SIZE=1024)
    return out
    ### END SOLUTION
