"""Wrong: a kernel only computes delta = rowsum(dO * O); torch.autograd gives dK and dV, torch products dQ.

expect: torch_free: computed on the host
"""
import torch
import triton
import triton.language as tl


@triton.jit
def delta_kernel(o_ptr, do_ptr, delta_ptr, H, N, D, so_z, so_h, so_n, so_d, sd_z, sd_h, sd_n, sd_d,
                 BLOCK_D: tl.constexpr):
    row = tl.program_id(0)  # one (batch, head, query row) per program
    z, h, n = row // (H * N), (row // N) % H, row % N
    d = tl.arange(0, BLOCK_D)
    o = tl.load(o_ptr + z * so_z + h * so_h + n * so_n + d * so_d, mask=d < D, other=0.0).to(tl.float32)
    do = tl.load(do_ptr + z * sd_z + h * sd_h + n * sd_n + d * sd_d, mask=d < D, other=0.0).to(tl.float32)
    tl.store(delta_ptr + row, tl.sum(o * do, axis=0))


def flash_attention_v2_bwd(q, k, v, o, lse, do, causal, sm_scale):
    B, H, N, D = q.shape
    delta = torch.empty((B, H, N), device=q.device, dtype=torch.float32)
    delta_kernel[(B * H * N,)](o, do, delta, H, N, D, *o.stride(), *do.stride(), BLOCK_D=triton.next_power_of_2(D))
    qf, kf, vf = (t.float().requires_grad_() for t in (q, k, v))
    scores = (qf @ kf.transpose(-1, -2)) * sm_scale
    if causal:
        hidden = torch.ones((N, N), dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(hidden, float("-inf"))
    p = torch.softmax(scores, dim=-1)
    dk, dv = torch.autograd.grad(p @ vf, (kf, vf), do.float())
    ds = p * (do.float() @ vf.transpose(-1, -2) - delta[..., None])
    dq = (ds @ kf) * sm_scale
    return dq.half(), dk.half(), dv.half()
