"""Wrong: the loops stop at the last whole block (n_cols // BLOCK_SIZE blocks), so the partial last block is left out of the max and the sum and never written.

expect: never written
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_blocked_kernel(x_ptr, out_ptr, n_cols, stride_xm, stride_xn, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(axis=0)
    offs_n = tl.arange(0, BLOCK_SIZE)
    n_full = (n_cols // BLOCK_SIZE) * BLOCK_SIZE
    row_max = -float("inf")
    for start in range(0, n_full, BLOCK_SIZE):
        x = tl.load(x_ptr + row * stride_xm + (start + offs_n) * stride_xn)
        row_max = tl.maximum(row_max, tl.max(x, axis=0))
    row_sum = 0.0
    for start in range(0, n_full, BLOCK_SIZE):
        x = tl.load(x_ptr + row * stride_xm + (start + offs_n) * stride_xn)
        row_sum += tl.sum(tl.exp(x - row_max), axis=0)
    for start in range(0, n_full, BLOCK_SIZE):
        x = tl.load(x_ptr + row * stride_xm + (start + offs_n) * stride_xn)
        tl.store(out_ptr + row * n_cols + start + offs_n, tl.exp(x - row_max) / row_sum)


def softmax_blocked(x: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = x.shape
    out = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    _softmax_blocked_kernel[(n_rows,)](x, out, n_cols, x.stride(0), x.stride(1), BLOCK_SIZE=4096, num_warps=8)
    return out
