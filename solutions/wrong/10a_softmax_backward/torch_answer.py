"""Wrong: launches a kernel that copies y, throws the copy away and returns the answer computed with torch.

expect: torch_free: computed on the host
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _copy_kernel(y_ptr, out_ptr, n_cols, stride_ym, stride_yn, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(axis=0)
    offs_n = tl.arange(0, BLOCK_SIZE)
    mask = offs_n < n_cols
    y = tl.load(y_ptr + row * stride_ym + offs_n * stride_yn, mask=mask)
    tl.store(out_ptr + row * n_cols + offs_n, y, mask=mask)


def softmax_backward(y: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = y.shape
    scratch = torch.empty((n_rows, n_cols), dtype=y.dtype, device=y.device)
    BLOCK_SIZE = triton.next_power_of_2(n_cols)
    _copy_kernel[(n_rows,)](y, scratch, n_cols, y.stride(0), y.stride(1), BLOCK_SIZE=BLOCK_SIZE)
    return (y * (dy - (dy * y).sum(dim=-1, keepdim=True))).contiguous()
