"""Attack: puzzle 7 allows two passes over each row of x; this is a three-pass softmax (max, sum, normalise) in
one kernel whose first pass, besides the max, stores each block of x into one of two scratch tensors of half its
size (the left and the right half of every row); the second and third passes read those. A rule that counts a
scratch tensor's loads only when it is as large as x sees x read once; the grader follows the values the kernel
stored unchanged from its loads of x back to x's elements, and counts every load of them as a load of x.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_through_halves(x_ptr, a_ptr, b_ptr, out_ptr, n_cols, wa, stride_xm, stride_xn, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    wb = n_cols - wa
    offs = tl.arange(0, BLOCK)
    row_max = -float("inf")
    for c in range(0, n_cols, BLOCK):  # pass 1: the max, and the copies
        cols = c + offs
        mask = cols < n_cols
        v = tl.load(x_ptr + row * stride_xm + cols * stride_xn, mask=mask, other=-float("inf"))
        row_max = tl.maximum(row_max, tl.max(v.to(tl.float32), axis=0))
        tl.store(a_ptr + row * wa + cols, v, mask=mask & (cols < wa))
        tl.store(b_ptr + row * wb + cols - wa, v, mask=mask & (cols >= wa))
    tl.debug_barrier()
    row_sum = 0.0
    for c in range(0, n_cols, BLOCK):  # pass 2: the sum, from the copies
        cols = c + offs
        mask = cols < n_cols
        va = tl.load(a_ptr + row * wa + cols, mask=mask & (cols < wa), other=-float("inf")).to(tl.float32)
        vb = tl.load(b_ptr + row * wb + cols - wa, mask=mask & (cols >= wa), other=-float("inf")).to(tl.float32)
        row_sum += tl.sum(tl.exp(tl.maximum(va, vb) - row_max), axis=0)
    for c in range(0, n_cols, BLOCK):  # pass 3: normalise, from the copies
        cols = c + offs
        mask = cols < n_cols
        va = tl.load(a_ptr + row * wa + cols, mask=mask & (cols < wa), other=-float("inf")).to(tl.float32)
        vb = tl.load(b_ptr + row * wb + cols - wa, mask=mask & (cols >= wa), other=-float("inf")).to(tl.float32)
        out = tl.exp(tl.maximum(va, vb) - row_max) / row_sum
        tl.store(out_ptr + row * n_cols + cols, out.to(out_ptr.dtype.element_ty), mask=mask)


def softmax_online(x):
    n_rows, n_cols = x.shape
    wa = n_cols // 2
    left = torch.empty((n_rows, max(wa, 1)), dtype=x.dtype, device=x.device)
    right = torch.empty((n_rows, n_cols - wa), dtype=x.dtype, device=x.device)
    out = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    _softmax_through_halves[(n_rows,)](x, left, right, out, n_cols, wa, x.stride(0), x.stride(1), BLOCK=1024)
    return out
