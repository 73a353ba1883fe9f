"""Wrong: the max pass loads the lanes past the end of the row as 0.0, so a row whose values are all far below 0 gets max 0, every exp underflows and the sum is 0.

expect: NaN or inf
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_blocked_kernel(x_ptr, out_ptr, n_cols, stride_xm, stride_xn, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(axis=0)
    offs_n = tl.arange(0, BLOCK_SIZE)
    row_max = -float("inf")
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + offs_n
        x = tl.load(x_ptr + row * stride_xm + cols * stride_xn, mask=cols < n_cols, other=0.0)
        row_max = tl.maximum(row_max, tl.max(x, axis=0))
    row_sum = 0.0
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + offs_n
        x = tl.load(x_ptr + row * stride_xm + cols * stride_xn, mask=cols < n_cols, other=-float("inf"))
        row_sum += tl.sum(tl.exp(x - row_max), axis=0)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + offs_n
        mask = cols < n_cols
        x = tl.load(x_ptr + row * stride_xm + cols * stride_xn, mask=mask)
        tl.store(out_ptr + row * n_cols + cols, tl.exp(x - row_max) / row_sum, mask=mask)


def softmax_blocked(x: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = x.shape
    out = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    _softmax_blocked_kernel[(n_rows,)](x, out, n_cols, x.stride(0), x.stride(1), BLOCK_SIZE=4096, num_warps=8)
    return out
