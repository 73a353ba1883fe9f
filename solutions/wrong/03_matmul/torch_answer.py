"""Wrong: computes a @ b with torch and launches no kernel.

expect: torch_free: computed on the host
"""
import torch


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a @ b
