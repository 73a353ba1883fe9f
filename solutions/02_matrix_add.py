"""Puzzle 2 answer key: add two matrices stored in any layout, one 2-D tile per program.

Run the grader on it with `python -m checks 2 --solution`.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def matrix_add_kernel(
    a_ptr, b_ptr, out_ptr,
    M, N,
    stride_am, stride_an,  # how many elements to step in memory for one row / one column of a
    stride_bm, stride_bn,
    stride_om, stride_on,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    ### BEGIN SOLUTION
    # A 2-D grid: axis 0 picks a block of rows, axis 1 a block of columns.
    pid_m = tl.program_id(axis=0)
    pid_n = tl.program_id(axis=1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # (BLOCK_M,) row indices
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # (BLOCK_N,) column indices
    # Broadcasting a column of row indices against a row of column indices gives the whole tile.
    # The mask compares logical indices with the matrix size; strides only turn indices into addresses.
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)  # (BLOCK_M, BLOCK_N)
    a = tl.load(a_ptr + offs_m[:, None] * stride_am + offs_n[None, :] * stride_an, mask=mask)
    b = tl.load(b_ptr + offs_m[:, None] * stride_bm + offs_n[None, :] * stride_bn, mask=mask)
    tl.store(out_ptr + offs_m[:, None] * stride_om + offs_n[None, :] * stride_on, a + b, mask=mask)
    ### END SOLUTION


def matrix_add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a + b for 2-D float32 tensors of the same shape, in any memory layout; the result is contiguous."""
    ### BEGIN SOLUTION
    M, N = a.shape
    out = torch.empty((M, N), device=a.device, dtype=a.dtype)
    grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]), triton.cdiv(N, meta["BLOCK_N"]))
    matrix_add_kernel[grid](
        a, b, out, M, N,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), out.stride(0), out.stride(1),
        BLOCK_M=32, BLOCK_N=64,
    )
    return out
    ### END SOLUTION
