"""Wrong: returns torch's a + b and launches nothing.

expect: kernel_launched: launched none
"""
import torch


def matrix_add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a + b).contiguous()
