"""Wrong: adds b into a in place (a.add_ through a kernel) and returns a.

expect: changed its input
"""
import torch
import triton
import triton.language as tl


@triton.jit
def add_into_kernel(a_ptr, b_ptr, M, N, stride_am, stride_an, stride_bm, stride_bn,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_n[None, :] * stride_an
    b = tl.load(b_ptr + offs_m[:, None] * stride_bm + offs_n[None, :] * stride_bn, mask=mask)
    tl.store(a_ptrs, tl.load(a_ptrs, mask=mask) + b, mask=mask)


def matrix_add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    M, N = a.shape
    grid = (triton.cdiv(M, 32), triton.cdiv(N, 32))
    add_into_kernel[grid](a, b, M, N, a.stride(0), a.stride(1), b.stride(0), b.stride(1), BLOCK_M=32, BLOCK_N=32)
    return a.contiguous()
