"""Wrong: the store's mask is 1-D (offs_m < M) for a 2-D block of pointers, which Triton refuses."""

import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(
    a_ptr,
    b_ptr,
    out_ptr,
    M,
    N,
    stride_am,
    stride_an,
    stride_bm,
    stride_bn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    a = tl.load(a_ptr + offs_m[:, None] * stride_am + offs_n[None, :] * stride_an, mask=mask)
    b = tl.load(b_ptr + offs_m[:, None] * stride_bm + offs_n[None, :] * stride_bn, mask=mask)
    tl.store(out_ptr + offs_m[:, None] * N + offs_n[None, :], a + b, mask=offs_m < M)


def matrix_add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    M, N = a.shape
    out = torch.empty((M, N), dtype=a.dtype, device=a.device)
    grid = (triton.cdiv(M, 16), triton.cdiv(N, 32))
    add_kernel[grid](a, b, out, M, N, a.stride(0), a.stride(1), b.stride(0), b.stride(1), BLOCK_M=16, BLOCK_N=32)
    return out
