"""Step 10b: dK and dV of FlashAttention-2, the first half of puzzle 10's backward pass.

Cases and inputs are puzzle 10's (q, k, v, o, lse, do, causal, sm_scale; see that module): they
are drawn by its `make_inputs`, and the reference is its autograd reference without dq.
"""

from __future__ import annotations

from typing import Any

from checks.puzzles import Expected, Work
from checks.puzzles import p10_flash_attention_v2_bwd as p10
from checks.puzzles.p09_flash_attention_v2_fwd import attention_work

make_inputs = p10.make_inputs

# torch has no kernel for dK and dV alone: the GPU timing compares with its whole backward pass.
baseline = p10.baseline


def reference(inputs: dict[str, Any]) -> list[Expected]:
    """Puzzle 10's reference (autograd, float64 on the CPU), keeping dk and dv."""
    return [e for e in p10.reference(inputs) if e.name in ("dk", "dv")]


def work(inputs: dict[str, Any]) -> Work:
    # Four of the backward's five matmuls (S, dP, dV, dK); reads q, k, v, o, do and writes dk, dv.
    return attention_work(inputs["q"], inputs["causal"], matmuls=4, tensors=7)
