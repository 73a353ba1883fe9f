"""Puzzle 8: FlashAttention-1 forward, o = softmax(q k^T * sm_scale) v (non-causal).

A case gives B, H, N, D and optionally `sm_scale` (default 1/sqrt(D)) and `layout` ("contiguous"
or "bnhd", a (B, N, H, D) tensor viewed as (B, H, N, D)) for all three inputs, or `layout_q`,
`layout_k`, `layout_v` for one of them. Inputs and reference are shared with puzzle 9.
"""

from __future__ import annotations

from typing import Any

import torch

from checks.memory import Arena
from checks.puzzles import BaselineFn, Expected, Work
from checks.puzzles.p09_flash_attention_v2_fwd import (
    O_DIMS,
    attention_reference,
    attention_work,
    draw_qkv,
    scale_of,
    sdpa_backends,
)
from checks.registry import Case


def make_inputs(case: Case, arena: Arena) -> dict[str, Any]:
    inputs: dict[str, Any] = draw_qkv(case, arena)
    inputs["sm_scale"] = scale_of(case)
    return inputs


def reference(inputs: dict[str, Any]) -> list[Expected]:
    o, _ = attention_reference(inputs["q"], inputs["k"], inputs["v"], False, inputs["sm_scale"])
    return [Expected("o", o, torch.float16, O_DIMS)]


def baseline(inputs: dict[str, Any]) -> BaselineFn:
    q, k, v, scale = inputs["q"], inputs["k"], inputs["v"], inputs["sm_scale"]
    return lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=scale)


def baselines(inputs: dict[str, Any]) -> dict[str, BaselineFn]:
    return sdpa_backends(inputs, causal=False)


def work(inputs: dict[str, Any]) -> Work:
    return attention_work(inputs["q"], causal=False)
