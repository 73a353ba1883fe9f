"""Wrong: torch computes softmax(q k^T * sm_scale) v; a kernel only copies the result into o.

expect: torch_free: computed on the host
"""
import torch
import triton
import triton.language as tl


@triton.jit
def copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=offs < n), mask=offs < n)


def attention_one_block(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, sm_scale: float) -> torch.Tensor:
    scores = (q.float() @ k.float().transpose(-1, -2)) * sm_scale
    answer = (torch.softmax(scores, dim=-1) @ v.float()).half()
    o = torch.empty(q.shape, device=q.device, dtype=torch.float16)
    copy_kernel[(triton.cdiv(o.numel(), 1024),)](answer, o, o.numel(), BLOCK=1024)
    return o
