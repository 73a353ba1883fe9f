"""Puzzle 5 answer key: softmax over the last dimension, one row per program.

Run the grader on it with `python -m checks 5 --solution`.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_kernel(
    x_ptr,  # pointer to x[0, 0]
    out_ptr,  # pointer to out[0, 0]; out is contiguous, so its row m starts at m * n_cols
    n_cols,  # N, the length of a row
    stride_xm,  # elements from x[m, n] to x[m + 1, n]
    stride_xn,  # elements from x[m, n] to x[m, n + 1]
    BLOCK_SIZE: tl.constexpr,  # a power of two >= n_cols: the whole row is one block
):
    ### BEGIN SOLUTION
    row = tl.program_id(axis=0).to(tl.int64)  # one program per row; int64, as x can pass 2^31 elements
    offs_n = tl.arange(0, BLOCK_SIZE)  # (BLOCK_SIZE,) column indices
    mask = offs_n < n_cols
    # Lanes past the end of the row read -inf: they cannot win the max, and exp(-inf) = 0 adds
    # nothing to the sum.
    x = tl.load(x_ptr + row * stride_xm + offs_n * stride_xn, mask=mask, other=-float("inf"))
    x = x.to(tl.float32)  # (BLOCK_SIZE,)
    # Safe softmax: after subtracting the row's max the largest exponent is exp(0) = 1, so
    # nothing overflows and the sum is at least 1.
    z = x - tl.max(x, axis=0)
    num = tl.exp(z)
    den = tl.sum(num, axis=0)
    out = num / den
    tl.store(out_ptr + row * n_cols + offs_n, out.to(out_ptr.dtype.element_ty), mask=mask)
    ### END SOLUTION


def softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension of a 2-D tensor (M, N) with N <= 16384, in any layout."""
    ### BEGIN SOLUTION
    n_rows, n_cols = x.shape
    out = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    BLOCK_SIZE = triton.next_power_of_2(n_cols)
    # A longer row gets more warps, so that each thread holds a handful of elements, not hundreds.
    num_warps = 4
    if BLOCK_SIZE >= 2048:
        num_warps = 8
    if BLOCK_SIZE >= 4096:
        num_warps = 16
    _softmax_kernel[(n_rows,)](
        x, out, n_cols, x.stride(0), x.stride(1), BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps
    )
    return out
    ### END SOLUTION
