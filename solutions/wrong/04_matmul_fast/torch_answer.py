"""Wrong: no kernel at all, the product comes from torch.

expect: kernel_launched: launched none of your own Triton kernels
"""
import torch


def matmul_fast(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a.float() @ b.float()).half()
