"""Wrong: a kernel only zero-fills C; torch.mm computes the product, added in place onto the zeros.

expect: torch_free: on the host
"""
import torch
import triton
import triton.language as tl


@triton.jit
def zero_kernel(c_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(c_ptr + offs, tl.zeros((BLOCK,), tl.float16), mask=offs < n)


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    c = torch.empty((a.shape[0], b.shape[1]), device=a.device, dtype=torch.float16)
    zero_kernel[(triton.cdiv(c.numel(), 1024),)](c, c.numel(), BLOCK=1024)
    c += torch.mm(a.float(), b.float()).half()
    return c
