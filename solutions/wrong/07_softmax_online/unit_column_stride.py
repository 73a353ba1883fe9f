"""Wrong: steps along a row by 1 element, ignoring x.stride(1), so a transposed x is read down its columns instead of along its rows.

expect: elements are wrong
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_online_kernel(x_ptr, out_ptr, n_cols, stride_xm, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(axis=0)
    offs_n = tl.arange(0, BLOCK_SIZE)
    m = -float("inf")
    d = 0.0
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + offs_n
        x = tl.load(x_ptr + row * stride_xm + cols, mask=cols < n_cols, other=-float("inf"))
        m_new = tl.maximum(m, tl.max(x, axis=0))
        if m_new > -float("inf"):
            d = d * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
            m = m_new
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + offs_n
        mask = cols < n_cols
        x = tl.load(x_ptr + row * stride_xm + cols, mask=mask)
        tl.store(out_ptr + row * n_cols + cols, tl.exp(x - m) / d, mask=mask)


def softmax_online(x: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = x.shape
    out = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    _softmax_online_kernel[(n_rows,)](x, out, n_cols, x.stride(0), BLOCK_SIZE=4096, num_warps=8)
    return out
