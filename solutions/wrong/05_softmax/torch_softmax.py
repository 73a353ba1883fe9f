"""Wrong: launches a kernel that copies x, throws the copy away and returns torch.softmax(x).

expect: torch_free: computed on the host
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _copy_kernel(x_ptr, out_ptr, n_cols, stride_xm, stride_xn, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(axis=0)
    offs_n = tl.arange(0, BLOCK_SIZE)
    mask = offs_n < n_cols
    x = tl.load(x_ptr + row * stride_xm + offs_n * stride_xn, mask=mask)
    tl.store(out_ptr + row * n_cols + offs_n, x, mask=mask)


def softmax(x: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = x.shape
    scratch = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    BLOCK_SIZE = triton.next_power_of_2(n_cols)
    _copy_kernel[(n_rows,)](x, scratch, n_cols, x.stride(0), x.stride(1), BLOCK_SIZE=BLOCK_SIZE)
    return torch.softmax(x, dim=-1)
