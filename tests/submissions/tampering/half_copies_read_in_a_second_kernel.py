"""Attack: puzzle 7 allows two passes over each row of x; this softmax makes three (max, sum, normalise) and more.
A first kernel copies x into two scratch tensors of half its size each (the left and the right half of every row),
and the three-pass kernel reads only those. A rule that counts a scratch tensor's loads only when it is as large as
x sees x read once; the grader follows the copy element by element, and counts every load of a copy of x[i] as a
load of x[i]. Two kernels, so the copies are complete before they are read: this runs on a GPU as well.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _copy_half(x_ptr, dst_ptr, start, width, stride_xm, stride_xn, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    for c in range(0, width, BLOCK):
        cols = c + tl.arange(0, BLOCK)
        mask = cols < width
        v = tl.load(x_ptr + row * stride_xm + (start + cols) * stride_xn, mask=mask)
        tl.store(dst_ptr + row * width + cols, v, mask=mask)


@triton.jit
def _softmax_of_halves(a_ptr, b_ptr, out_ptr, wa, wb, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    a_row, b_row, out_row = a_ptr + row * wa, b_ptr + row * wb, out_ptr + row * (wa + wb)
    offs = tl.arange(0, BLOCK)
    row_max = -float("inf")
    for c in range(0, wa, BLOCK):
        v = tl.load(a_row + c + offs, mask=c + offs < wa, other=-float("inf")).to(tl.float32)
        row_max = tl.maximum(row_max, tl.max(v, axis=0))
    for c in range(0, wb, BLOCK):
        v = tl.load(b_row + c + offs, mask=c + offs < wb, other=-float("inf")).to(tl.float32)
        row_max = tl.maximum(row_max, tl.max(v, axis=0))
    row_sum = 0.0
    for c in range(0, wa, BLOCK):
        v = tl.load(a_row + c + offs, mask=c + offs < wa, other=-float("inf")).to(tl.float32)
        row_sum += tl.sum(tl.exp(v - row_max), axis=0)
    for c in range(0, wb, BLOCK):
        v = tl.load(b_row + c + offs, mask=c + offs < wb, other=-float("inf")).to(tl.float32)
        row_sum += tl.sum(tl.exp(v - row_max), axis=0)
    for c in range(0, wa, BLOCK):
        mask = c + offs < wa
        v = tl.load(a_row + c + offs, mask=mask, other=-float("inf")).to(tl.float32)
        tl.store(out_row + c + offs, (tl.exp(v - row_max) / row_sum).to(out_ptr.dtype.element_ty), mask=mask)
    for c in range(0, wb, BLOCK):
        mask = c + offs < wb
        v = tl.load(b_row + c + offs, mask=mask, other=-float("inf")).to(tl.float32)
        tl.store(out_row + wa + c + offs, (tl.exp(v - row_max) / row_sum).to(out_ptr.dtype.element_ty), mask=mask)


def softmax_online(x):
    n_rows, n_cols = x.shape
    wa = n_cols // 2
    wb = n_cols - wa
    left = torch.empty((n_rows, max(wa, 1)), dtype=x.dtype, device=x.device)
    right = torch.empty((n_rows, wb), dtype=x.dtype, device=x.device)
    if wa:
        _copy_half[(n_rows,)](x, left, 0, wa, x.stride(0), x.stride(1), BLOCK=1024)
    _copy_half[(n_rows,)](x, right, wa, wb, x.stride(0), x.stride(1), BLOCK=1024)
    out = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    _softmax_of_halves[(n_rows,)](left, right, out, wa, wb, BLOCK=1024)
    return out
