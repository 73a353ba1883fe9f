"""Wrong: computes a @ b with torch and launches no kernel.

expect: kernel_launched: launched none
"""
import torch


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a @ b
