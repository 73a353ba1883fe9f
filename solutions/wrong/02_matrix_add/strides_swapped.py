"""Wrong: passes a's strides in the order (column, row), which is right only for square symmetric cases.

expect: elements from outside the input || elements are wrong
"""
import torch
import triton
import triton.language as tl


@triton.jit
def matrix_add_kernel(a_ptr, b_ptr, out_ptr, M, N, stride_am, stride_an, stride_bm, stride_bn,
                      stride_om, stride_on, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    a = tl.load(a_ptr + offs_m[:, None] * stride_am + offs_n[None, :] * stride_an, mask=mask)
    b = tl.load(b_ptr + offs_m[:, None] * stride_bm + offs_n[None, :] * stride_bn, mask=mask)
    tl.store(out_ptr + offs_m[:, None] * stride_om + offs_n[None, :] * stride_on, a + b, mask=mask)


def matrix_add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    M, N = a.shape
    out = torch.empty((M, N), device=a.device, dtype=a.dtype)
    grid = (triton.cdiv(M, 32), triton.cdiv(N, 32))
    matrix_add_kernel[grid](a, b, out, M, N, a.stride(1), a.stride(0), b.stride(0), b.stride(1),
                            out.stride(0), out.stride(1), BLOCK_M=32, BLOCK_N=32)
    return out
