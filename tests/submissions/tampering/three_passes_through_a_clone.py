"""Attack: puzzle 7 asks for two passes over each row; this is puzzle 6's three-pass kernel, which reads a clone
of x that the host code makes, so that the access log's loads fall on the copy, not on x, and a rule that counts
the passes over x found none to count."""

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
    row = tl.program_id(axis=0)  # one program per row
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


def softmax_online(x):
    copy = x.clone()
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    _softmax_blocked_kernel[(x.shape[0],)](copy, out, x.shape[1], copy.stride(0), copy.stride(1), BLOCK_SIZE=1024)
    return out
