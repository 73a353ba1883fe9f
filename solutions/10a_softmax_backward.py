"""Step 10a answer key: the backward pass of a softmax, one row per program.

Given y = softmax(x) over each row and the upstream gradient dy = dL/dy, the gradient with respect
to x is dx = y * (dy - rowsum(dy * y)). The row sum is the same number the attention backward
calls delta (D_i = rowsum(dO_i * O_i)) in puzzle 10.

Run the grader on it with `python -m checks 10a --solution`.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_bwd_kernel(
    y_ptr,  # pointer to y[0, 0]
    dy_ptr,  # pointer to dy[0, 0]
    dx_ptr,  # pointer to dx[0, 0]; dx is contiguous, so its row m starts at m * n_cols
    n_cols,  # N, the length of a row
    stride_ym, stride_yn,  # elements from y[m, n] to y[m + 1, n] and to y[m, n + 1]
    stride_dym, stride_dyn,  # the same for dy, which may be laid out differently
    BLOCK_SIZE: tl.constexpr,  # a power of two >= n_cols: the whole row is one block
):
    ### BEGIN SOLUTION
    row = tl.program_id(axis=0).to(tl.int64)  # one program per row
    offs_n = tl.arange(0, BLOCK_SIZE)  # (BLOCK_SIZE,) column indices
    mask = offs_n < n_cols
    # Lanes past the end of the row read 0: they add nothing to the row sum.
    y = tl.load(y_ptr + row * stride_ym + offs_n * stride_yn, mask=mask, other=0.0)  # (BLOCK_SIZE,)
    dy = tl.load(dy_ptr + row * stride_dym + offs_n * stride_dyn, mask=mask, other=0.0)  # (BLOCK_SIZE,)
    # -- the one number per row that every dx of the row needs: delta = sum_j dy_j * y_j
    delta = tl.sum(dy * y, axis=0)
    dx = y * (dy - delta)
    tl.store(dx_ptr + row * n_cols + offs_n, dx, mask=mask)
    ### END SOLUTION


def softmax_backward(y: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    """dx = y * (dy - rowsum(dy * y)) for y = softmax(x) over rows (M, N), N <= 16384, any strides."""
    ### BEGIN SOLUTION
    n_rows, n_cols = y.shape
    dx = torch.empty((n_rows, n_cols), dtype=y.dtype, device=y.device)
    BLOCK_SIZE = triton.next_power_of_2(n_cols)
    # A longer row gets more warps, so that each thread holds a handful of elements, not hundreds.
    num_warps = 4
    if BLOCK_SIZE >= 2048:
        num_warps = 8
    if BLOCK_SIZE >= 4096:
        num_warps = 16
    _softmax_bwd_kernel[(n_rows,)](
        y, dy, dx, n_cols, y.stride(0), y.stride(1), dy.stride(0), dy.stride(1),
        BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps,
    )
    return dx
    ### END SOLUTION
