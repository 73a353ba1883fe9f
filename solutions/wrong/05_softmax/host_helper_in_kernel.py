"""Wrong: the kernel calls a plain Python helper, which Triton's GPU compiler cannot compile (the interpreter
would run it).

expect: kernel_calls: a call of `shifted`
"""
import torch
import triton
import triton.language as tl


def shifted(row, top):
    return row - top


@triton.jit
def _softmax_kernel(x_ptr, out_ptr, n_cols, stride_xm, stride_xn, stride_om, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_xm + cols * stride_xn, mask=mask, other=-float("inf"))
    numerator = tl.exp(shifted(x, tl.max(x, axis=0)))
    tl.store(out_ptr + row * stride_om + cols, numerator / tl.sum(numerator, axis=0), mask=mask)


def softmax(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    out = torch.empty((m, n), dtype=x.dtype, device=x.device)
    _softmax_kernel[(m,)](x, out, n, x.stride(0), x.stride(1), out.stride(0), BLOCK_N=triton.next_power_of_2(n))
    return out
