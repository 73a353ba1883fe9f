"""Wrong: launches a kernel that is not in its own code (the answer key's, imported from its file).

expect: kernels_from_source: not a @triton.jit function of your code
"""
import importlib.util
from pathlib import Path

import torch
import triton

KEY = Path(__file__).resolve().parents[2] / "01_vector_add.py"
if not KEY.exists():
    KEY = Path.cwd() / "solutions" / "01_vector_add.py"
spec = importlib.util.spec_from_file_location("borrowed", KEY)
borrowed = importlib.util.module_from_spec(spec)
spec.loader.exec_module(borrowed)


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    borrowed.add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK_SIZE=1024)
    return out
