"""Wrong: no kernel at all, the product comes from torch.

expect: torch_free: computed on the host
"""
import torch


def matmul_fast(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a.float() @ b.float()).half()
