"""Right, another style: each program takes a tile of rows (a 2-D block), with the row sums along axis 1."""

import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_bwd_rows(
    y_ptr, dy_ptr, dx_ptr, M, N, stride_ym, stride_yn, stride_dym, stride_dyn, ROWS: tl.constexpr, BLOCK_N: tl.constexpr
):
    offs_m = (tl.program_id(0) * ROWS + tl.arange(0, ROWS)).to(tl.int64)
    offs_n = tl.arange(0, BLOCK_N)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    y = tl.load(y_ptr + offs_m[:, None] * stride_ym + offs_n[None, :] * stride_yn, mask=mask, other=0.0)
    dy = tl.load(dy_ptr + offs_m[:, None] * stride_dym + offs_n[None, :] * stride_dyn, mask=mask, other=0.0)
    delta = tl.sum(y * dy, axis=1)  # (ROWS,)
    tl.store(dx_ptr + offs_m[:, None] * N + offs_n[None, :], y * (dy - delta[:, None]), mask=mask)


def softmax_backward(y: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    M, N = y.shape
    dx = torch.empty_like(y, memory_format=torch.contiguous_format)
    BLOCK_N = triton.next_power_of_2(N)
    ROWS = max(1, min(16, 4096 // BLOCK_N))
    _softmax_bwd_rows[(triton.cdiv(M, ROWS),)](y, dy, dx, M, N, *y.stride(), *dy.stride(), ROWS=ROWS, BLOCK_N=BLOCK_N)
    return dx
