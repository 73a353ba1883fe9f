"""Puzzle 16: FlashAttention forward on Hopper in Gluon: (o, lse) as puzzle 9, for contiguous q, k, v.

A case gives B, H, N, D (D in {64, 128}) and optionally `causal`, `sm_scale` and `score_std`, as puzzle 9's; the
inputs are contiguous (TMA descriptors over (B*H*N, D) views). The reference and work are puzzle 9's; the baseline
is torch's scaled_dot_product_attention held to its cuDNN backend, the fastest torch has on a Hopper GPU.
"""

from __future__ import annotations

from typing import Any

import torch

from checks.memory import Arena, make_input
from checks.puzzles import BaselineFn, Work
from checks.puzzles.p09_flash_attention_v2_fwd import attention_work, reference, scale_of, spread
from checks.registry import Case

__all__ = ["baseline", "make_inputs", "reference", "work"]


def make_inputs(case: Case, arena: Arena) -> dict[str, Any]:
    shape = (case.B, case.H, case.N, case.D)
    inputs: dict[str, Any] = {
        name: make_input(arena, shape, torch.float16, name, "contiguous", spread(case, name))
        for name in ("q", "k", "v")
    }
    inputs["causal"] = bool(case.causal)
    inputs["sm_scale"] = scale_of(case)
    return inputs


def baseline(inputs: dict[str, Any]) -> BaselineFn:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q, k, v, causal, scale = inputs["q"], inputs["k"], inputs["v"], inputs["causal"], inputs["sm_scale"]

    def cudnn() -> Any:
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)

    return cudnn


def work(inputs: dict[str, Any]) -> Work:
    return attention_work(inputs["q"], inputs["causal"])
