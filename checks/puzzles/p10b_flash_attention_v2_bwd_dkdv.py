"""Step 10b: dK and dV of FlashAttention-2, the first half of puzzle 10's backward pass.

Cases and inputs are puzzle 10's (q, k, v, o, lse, do, causal, sm_scale; see that module): they
are drawn by its `make_inputs`, and the reference is its autograd reference without dq.
"""

from __future__ import annotations

from typing import Any

from checks.puzzles import Expected, Work
from checks.puzzles import p10_flash_attention_v2_bwd as p10

make_inputs = p10.make_inputs

# torch has no kernel for dK and dV alone: the GPU timing compares with its whole backward pass.
baseline = p10.baseline


def reference(inputs: dict[str, Any]) -> list[Expected]:
    """Puzzle 10's reference (autograd, float64 on the CPU), keeping dk and dv."""
    return [e for e in p10.reference(inputs) if e.name in ("dk", "dv")]


def work(inputs: dict[str, Any]) -> Work:
    b, h, n, d = inputs["q"].shape
    # Read q, k, v, o, do; write dk, dv. Four of the backward's five matmuls (S, dP, dV, dK), half when causal.
    flops = 4 * 2.0 * b * h * n * n * d
    if inputs["causal"]:
        flops /= 2
    return Work(bytes=7 * b * h * n * d * inputs["q"].element_size(), flops=flops)
