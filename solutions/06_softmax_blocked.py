"""Puzzle 6 answer key: softmax of rows longer than a block, in three passes over each row.

Run the grader on it with `python -m checks 6 --solution`.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_blocked_kernel(
    x_ptr,  # pointer to x[0, 0]
    out_ptr,  # pointer to out[0, 0]; out is contiguous, so its row m starts at m * n_cols
    n_cols,  # N, the length of a row (any length, up to 2**20)
    stride_xm,  # elements from x[m, n] to x[m + 1, n]
    stride_xn,  # elements from x[m, n] to x[m, n + 1]
    BLOCK_SIZE: tl.constexpr,  # columns per step of the loops; a row is cdiv(n_cols, BLOCK_SIZE) blocks
):
    ### BEGIN SOLUTION
    row = tl.program_id(axis=0).to(tl.int64)  # one program per row; int64, as x can pass 2^31 elements
    x_row_ptr = x_ptr + row * stride_xm
    out_row_ptr = out_ptr + row * n_cols
    offs_n = tl.arange(0, BLOCK_SIZE)  # (BLOCK_SIZE,)

    # -- pass 1: the row's max
    row_max = -float("inf")
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + offs_n
        x = tl.load(x_row_ptr + cols * stride_xn, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        row_max = tl.maximum(row_max, tl.max(x, axis=0))

    # -- pass 2: the normaliser, sum of exp(x - row_max) over the whole row
    row_sum = 0.0
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + offs_n
        x = tl.load(x_row_ptr + cols * stride_xn, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        row_sum += tl.sum(tl.exp(x - row_max), axis=0)

    # -- pass 3: normalise and write
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + offs_n
        mask = cols < n_cols
        x = tl.load(x_row_ptr + cols * stride_xn, mask=mask, other=-float("inf")).to(tl.float32)
        out = tl.exp(x - row_max) / row_sum
        tl.store(out_row_ptr + cols, out.to(out_ptr.dtype.element_ty), mask=mask)
    ### END SOLUTION


def softmax_blocked(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension of a 2-D tensor (M, N), N up to 2**20, in any layout."""
    ### BEGIN SOLUTION
    n_rows, n_cols = x.shape
    out = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    # A fixed block, whatever the row length: the loops walk the row block by block.
    BLOCK_SIZE = 4096
    _softmax_blocked_kernel[(n_rows,)](
        x, out, n_cols, x.stride(0), x.stride(1), BLOCK_SIZE=BLOCK_SIZE, num_warps=8
    )
    return out
    ### END SOLUTION
