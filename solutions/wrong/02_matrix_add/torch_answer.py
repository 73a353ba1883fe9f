"""Wrong: returns torch's a + b and launches nothing.

expect: torch_free: computed on the host
"""
import torch


def matrix_add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a + b).contiguous()
