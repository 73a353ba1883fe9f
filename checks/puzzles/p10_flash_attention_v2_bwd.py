"""Puzzle 10: FlashAttention-2 backward, (dq, dk, dv) of o = softmax(q k^T * sm_scale [causal]) v.

A case gives B, H, N, D and optionally `causal` (default false), `sm_scale` (default 1/sqrt(D)) and
`layout` ("contiguous" or "bnhd", a (B, N, H, D) tensor viewed as (B, H, N, D)) for q, k, v, o and
do, or `layout_q`, `layout_k`, `layout_v`, `layout_o`, `layout_do` for one of them, and `score_std` as
puzzle 9 (large scores). o and lse come from a float32 forward pass over the drawn q, k, v; the
upstream gradient do is random.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from checks.memory import Arena, make_input
from checks.puzzles import BaselineFn, Expected, Work
from checks.puzzles.p09_flash_attention_v2_fwd import attention_work, spread
from checks.puzzles.p09_flash_attention_v2_fwd import method_cases as method_cases  # causal skipping, as in 9
from checks.registry import Case

Q_DIMS = ("batch", "heads", "query rows", "head-dim columns")
KV_DIMS = ("batch", "heads", "key rows", "head-dim columns")
# Scores held at once by the chunked forward pass (float32): 128M of them, 512 MB.
_CHUNK_SCORES = 1 << 27


def _causal_hidden(rows: torch.Tensor, n: int) -> torch.Tensor:
    """(len(rows), n) bool: True where key j comes after query row i, which causal attention hides."""
    return torch.arange(n, device=rows.device)[None, :] > rows[:, None]


def forward(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, sm_scale: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """(o, lse) in float32, a block of query rows at a time so that long sequences fit in memory."""
    b, h, n, _ = q.shape
    kf, vf = k.float(), v.float()
    rows = max(1, _CHUNK_SCORES // (b * h * n))
    outs, lses = [], []
    for start in range(0, n, rows):
        s = (q[:, :, start : start + rows].float() @ kf.transpose(-1, -2)) * sm_scale  # (B, H, rows, N)
        if causal:
            rows_here = torch.arange(start, start + s.shape[2], device=q.device)
            s = s.masked_fill(_causal_hidden(rows_here, n), float("-inf"))
        lse = torch.logsumexp(s, dim=-1)  # (B, H, rows)
        outs.append(torch.exp(s - lse[..., None]) @ vf)
        lses.append(lse)
    return torch.cat(outs, dim=2), torch.cat(lses, dim=2)


def make_inputs(case: Case, arena: Arena) -> dict[str, Any]:
    shape = (case.B, case.H, case.N, case.D)

    def layout(name: str) -> str:
        return case.layout_of(name)

    q, k, v = (make_input(arena, shape, torch.float16, name, layout(name), spread(case, name)) for name in "qkv")
    causal = bool(case.causal)
    sm_scale = float(case.sm_scale or 1.0 / math.sqrt(case.D))
    o_ref, lse_ref = forward(q, k, v, causal, sm_scale)
    # o and lse live in guarded buffers too, so a kernel that writes into them is caught.
    o = make_input(arena, shape, torch.float16, "o", layout("o"))
    o.copy_(o_ref.to(torch.float16))
    lse = make_input(arena, shape[:3], torch.float32, "lse")
    lse.copy_(lse_ref)
    do = make_input(arena, shape, torch.float16, "do", layout("do"))
    return {"q": q, "k": k, "v": v, "o": o, "lse": lse, "do": do, "causal": causal, "sm_scale": sm_scale}


def reference(inputs: dict[str, Any]) -> list[Expected]:
    """Autograd through softmax(q k^T * sm_scale) v, in float64 on the CPU and float32 on a GPU."""
    q0 = inputs["q"]
    wide = torch.float64 if q0.device.type == "cpu" else torch.float32
    q, k, v = (inputs[name].detach().to(wide).requires_grad_(True) for name in ("q", "k", "v"))
    n = q.shape[2]
    s = (q @ k.transpose(-1, -2)) * inputs["sm_scale"]  # (B, H, N, N)
    if inputs["causal"]:
        s = s.masked_fill(_causal_hidden(torch.arange(n, device=q.device), n), float("-inf"))
    o = torch.softmax(s, dim=-1) @ v
    dq, dk, dv = torch.autograd.grad(o, (q, k, v), inputs["do"].to(wide))
    return [
        Expected("dq", dq, torch.float16, Q_DIMS),
        Expected("dk", dk, torch.float16, KV_DIMS),
        Expected("dv", dv, torch.float16, KV_DIMS),
    ]


def _sdpa_backward(inputs: dict[str, Any], backend: Any = None) -> BaselineFn:
    """The backward pass alone of scaled_dot_product_attention, through the backend named (or torch's choice)."""
    import contextlib

    from torch.nn.attention import sdpa_kernel

    q, k, v = (inputs[name].detach().clone().requires_grad_(True) for name in ("q", "k", "v"))
    with sdpa_kernel(backend) if backend is not None else contextlib.nullcontext():
        o = torch.nn.functional.scaled_dot_product_attention(
            q, k, v, is_causal=inputs["causal"], scale=inputs["sm_scale"]
        )
    return lambda: torch.autograd.grad(o, (q, k, v), inputs["do"], retain_graph=True)


def baseline(inputs: dict[str, Any]) -> BaselineFn:
    """The backward pass of torch's scaled_dot_product_attention: its flash kernel where it has one."""
    from torch.nn.attention import SDPBackend

    try:
        return _sdpa_backward(inputs, SDPBackend.FLASH_ATTENTION)
    except RuntimeError:  # no flash kernel for this device or shape: let torch choose
        return _sdpa_backward(inputs)


def baselines(inputs: dict[str, Any]) -> dict[str, BaselineFn]:
    """`make bench`'s other baseline: the backward pass of SDPA's cuDNN backend, where it runs here."""
    from torch.nn.attention import SDPBackend

    try:
        return {"sdpa cudnn": _sdpa_backward(inputs, SDPBackend.CUDNN_ATTENTION)}
    except RuntimeError:
        return {}


def work(inputs: dict[str, Any]) -> Work:
    # Counted as in Triton's fused-attention tutorial: the backward's five matmuls (2.5x the forward's two);
    # reads q, k, v, o, do and writes dq, dk, dv.
    return attention_work(inputs["q"], inputs["causal"], matmuls=5, tensors=8)
