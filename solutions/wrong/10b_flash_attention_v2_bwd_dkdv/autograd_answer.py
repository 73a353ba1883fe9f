"""Wrong: launches a kernel that computes delta, then returns dk and dv from torch's autograd.

expect: torch_free: computed on the host
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _attn_bwd_preprocess(o_ptr, do_ptr, delta_ptr, stride_om, stride_dom, N_CTX, HEAD_DIM: tl.constexpr):
    row = tl.program_id(0)  # a (batch, head, query row) of a contiguous o and do
    offs_d = tl.arange(0, HEAD_DIM)
    o = tl.load(o_ptr + row * stride_om + offs_d).to(tl.float32)
    do = tl.load(do_ptr + row * stride_dom + offs_d).to(tl.float32)
    tl.store(delta_ptr + row, tl.sum(o * do, axis=0))


def flash_attention_v2_bwd_dkdv(q, k, v, o, lse, do, causal, sm_scale):
    B, H, N, D = q.shape
    o_c, do_c = o.contiguous(), do.contiguous()
    delta = torch.empty(B * H * N, dtype=torch.float32, device=q.device)
    _attn_bwd_preprocess[(B * H * N,)](o_c, do_c, delta, D, D, N, HEAD_DIM=D)
    q, k, v = (t.detach().float().requires_grad_(True) for t in (q, k, v))
    s = (q @ k.transpose(-1, -2)) * sm_scale
    if causal:
        s = s.masked_fill(torch.ones(N, N, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    out = torch.softmax(s, dim=-1) @ v
    dk, dv = torch.autograd.grad(out, (k, v), do.float())
    return dk.half(), dv.half()
