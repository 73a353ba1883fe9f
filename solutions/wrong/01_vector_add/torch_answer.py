"""Wrong: no kernel at all, the answer comes from torch.

expect: torch_free: computed on the host (aten.add
"""
import torch


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x + y
