"""Wrong: no kernel at all, the answer comes from torch.

expect: launched none of your own Triton kernels
"""
import torch


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x + y
