"""Attack: two methods, one chosen by the device the input lives on: puzzle 7's two passes where a check's
interpreter stage used to record (CPU tensors), puzzle 6's three passes on a GPU, where no access log is kept.
On a GPU machine the interpreter stage records on the GPU as the GPU stage does, so the interpreter judges the
three-pass method the GPU runs, and the limit of two passes fails. (On a machine without a GPU the two-pass method
is the one that runs, and it passes: right there.)"""

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
    row = tl.program_id(axis=0)  # one program per row
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
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if x.is_cuda:
        _softmax_blocked_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), x.stride(1), BLOCK_SIZE=4096)
    else:
        _softmax_online_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), x.stride(1), BLOCK_SIZE=4096)
    return out
