"""Step 8a: attention in one block, o = softmax(q k^T * sm_scale) v (non-causal), N <= 128.

A case gives B, H, N, D and optionally `sm_scale` (default 1/sqrt(D)) and `layout` ("contiguous"
or "bnhd", a (B, N, H, D) tensor viewed as (B, H, N, D)) for all three inputs, or `layout_q`,
`layout_k`, `layout_v` for one of them. Inputs and reference are puzzle 8's.
"""

from __future__ import annotations

from checks.puzzles.p08_flash_attention_v1 import baseline, baselines, make_inputs, reference, work

__all__ = ["baseline", "baselines", "make_inputs", "reference", "work"]
