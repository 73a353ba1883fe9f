"""Wrong: a right kernel, but when it does not run (no flag set) the host computes the answer with numpy.

Recording its plan, the host sees no flag (no kernel runs there) and returns numpy's answer, which differs
between the two draws of the plan: the answer was computed from the data on the host.

expect: plan_from_shapes: computed from the data
"""
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, flag_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)
    tl.store(flag_ptr, 1)


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    flag = torch.zeros(1, dtype=torch.int32, device=x.device)
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, flag, x.numel(), BLOCK_SIZE=1024)
    if flag.item() == 0:
        return torch.from_numpy(x.cpu().numpy() + y.cpu().numpy()).to(x.device)
    return out
