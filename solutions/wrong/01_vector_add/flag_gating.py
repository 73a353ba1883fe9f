"""Wrong: a kernel only sets a flag; the host reads it with .item() and then fills the output itself.

The host fills the output only in the process that records its plan: the replay, where only the kernel
runs, leaves the output unwritten.

expect: values: never written
"""
import torch
import triton
import triton.language as tl


@triton.jit
def flag_kernel(flag_ptr):
    tl.store(flag_ptr, 1)


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    flag = torch.zeros(1, dtype=torch.int32, device=x.device)
    out = torch.empty_like(x)
    flag_kernel[(1,)](flag)
    if flag.item() == 1:
        out.copy_(torch.from_numpy(x.cpu().numpy() + y.cpu().numpy()))
    return out
