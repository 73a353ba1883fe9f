"""Step 9a: FlashAttention-2 forward without the mask, o = softmax(q k^T * sm_scale) v and its logsumexp.

A case gives B, H, N, D and optionally `sm_scale` (default 1/sqrt(D)) and `layout` ("contiguous" or
"bnhd", a (B, N, H, D) tensor viewed as (B, H, N, D)) for all three inputs, or `layout_q`,
`layout_k`, `layout_v` for one of them. Inputs are puzzle 8's; the reference is puzzle 9's, non-causal.
"""

from __future__ import annotations

from typing import Any

import torch

from checks.puzzles import Expected, Work
from checks.puzzles.p08_flash_attention_v1 import baseline, baselines, make_inputs
from checks.puzzles.p09_flash_attention_v2_fwd import LSE_DIMS, O_DIMS, attention_reference, attention_work

__all__ = ["baseline", "baselines", "make_inputs", "reference", "work"]


def reference(inputs: dict[str, Any]) -> list[Expected]:
    o, lse = attention_reference(inputs["q"], inputs["k"], inputs["v"], False, inputs["sm_scale"])
    return [Expected("o", o, torch.float16, O_DIMS), Expected("lse", lse, torch.float32, LSE_DIMS)]


def work(inputs: dict[str, Any]) -> Work:
    return attention_work(inputs["q"], causal=False)
