"""Wrong: the copy is torch's own, and no kernel of the submission runs.

expect: torch_free || kernel_launched
"""

import torch


def tma_copy(x: torch.Tensor) -> torch.Tensor:
    return x.clone()
