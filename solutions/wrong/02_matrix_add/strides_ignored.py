"""Wrong: assumes a contiguous row-major layout (row stride N, column stride 1) for every input.

expect: elements are wrong
"""
import torch
import triton
import triton.language as tl


@triton.jit
def matrix_add_kernel(a_ptr, b_ptr, out_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    offs = offs_m[:, None] * N + offs_n[None, :]
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(out_ptr + offs, tl.load(a_ptr + offs, mask=mask) + tl.load(b_ptr + offs, mask=mask), mask=mask)


def matrix_add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    M, N = a.shape
    out = torch.empty((M, N), device=a.device, dtype=a.dtype)
    matrix_add_kernel[(triton.cdiv(M, 32), triton.cdiv(N, 32))](a, b, out, M, N, BLOCK_M=32, BLOCK_N=32)
    return out
