"""Puzzle 7 answer key: online softmax, two passes over each row (online max and sum, then normalise).

Run the grader on it with `python -m checks 7 --solution`.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_online_kernel(
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

    # -- pass 1: running max m and running sum d = sum of exp(x - m) over the blocks seen so far
    m = -float("inf")
    d = 0.0
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + offs_n
        x = tl.load(x_row_ptr + cols * stride_xn, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        # While every value seen is -inf, m_new is -inf and exp(x - m_new) would be exp(nan):
        # such a block adds exp(-inf) = 0 to the sum, so it is skipped.
        if m_new > -float("inf"):
            # d was summed relative to the old max: exp(m - m_new) moves it to the new one.
            d = d * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
            m = m_new

    # -- pass 2: normalise and write
    inv_d = 1.0 / d
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + offs_n
        mask = cols < n_cols
        x = tl.load(x_row_ptr + cols * stride_xn, mask=mask, other=-float("inf")).to(tl.float32)
        out = tl.exp(x - m) * inv_d
        tl.store(out_row_ptr + cols, out.to(out_ptr.dtype.element_ty), mask=mask)
    ### END SOLUTION


def softmax_online(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension of a 2-D tensor (M, N), N up to 2**20, in any layout."""
    ### BEGIN SOLUTION
    n_rows, n_cols = x.shape
    out = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    # A fixed block, whatever the row length: the loops walk the row block by block.
    BLOCK_SIZE = 4096
    _softmax_online_kernel[(n_rows,)](
        x, out, n_cols, x.stride(0), x.stride(1), BLOCK_SIZE=BLOCK_SIZE, num_warps=8
    )
    return out
    ### END SOLUTION
