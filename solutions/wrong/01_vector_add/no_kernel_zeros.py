"""Wrong: launches no kernel at all and returns a tensor of zeros it allocated.

expect: kernel_launched: launched none of your own Triton kernels
"""
import torch


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.zeros_like(x)
