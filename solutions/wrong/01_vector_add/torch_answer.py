"""Wrong: no kernel at all, the answer comes from torch.

expect: kernel_launched: launched none of your own Triton kernels
"""
import torch


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x + y
