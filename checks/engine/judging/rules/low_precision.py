"""The cause of a matmul's lost digits: a float16 running accumulator.

A tile loop that keeps its sum in float16 (`acc = tl.zeros(..., tl.float16)`, then `acc += tl.dot(a, b)` cast to
float16, or `tl.dot(a, b, acc)` into it) rounds the sum to 11 bits after every K block: on a long K, or where the
products do not cancel, the sum loses digits the float32 reference keeps. The cause is named only on proof: the
output is, within the tolerance, the reference recomputed with that float16 running sum over the kernel's K blocks,
and not the reference itself (`float16_accumulator`).
"""

from __future__ import annotations

from typing import Any

import torch

from checks.engine.judging.rules.problem import CaseContext

K_BLOCKS = (16, 32, 64, 128, 256)  # K blocks tried when no launch names one (BLOCK_K, BK)
MOST_STEPS = 4096  # K blocks the recomputation walks at most


def float16_running_sum(a: torch.Tensor, b: torch.Tensor, block_k: int) -> torch.Tensor:
    """a @ b summed as a float16 accumulator sums it: each K block's product in float32, rounded to float16, added
    to the float16 sum and rounded again."""
    a32, b32 = a.detach().cpu().float(), b.detach().cpu().float()
    acc = torch.zeros((a32.shape[0], b32.shape[1]), dtype=torch.float16)
    for k0 in range(0, a32.shape[1], block_k):
        part = (a32[:, k0 : k0 + block_k] @ b32[k0 : k0 + block_k]).half()
        acc = (acc.float() + part.float()).half()
    return acc


def float16_accumulator(ctx: CaseContext, exp: Any) -> str | None:
    """'c is the float16 running sum...' when this matmul output (the product of the inputs a and b) matches the
    reference recomputed with a float16 accumulator over one of the kernels' K blocks; None otherwise."""
    a, b = ctx.inputs.get("a"), ctx.inputs.get("b")
    if not all(isinstance(t, torch.Tensor) and t.dim() == 2 and t.dtype == torch.float16 for t in (a, b)):
        return None
    index = next((i for i, e in enumerate(ctx.expected) if e is exp), None)
    out = ctx.outputs[index] if index is not None and index < len(ctx.outputs) else None
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != (a.shape[0], b.shape[1]) or a.shape[1] != b.shape[0]:
        return None
    named = [v for launch in ctx.obs.launches for k, v in launch.blocks.items() if "K" in k.upper().split("_")[-1]]
    atol, rtol = ctx.puzzle.tolerance_for(exp.name)
    yours = out.detach().cpu().double()
    for block_k in dict.fromkeys([*named, *K_BLOCKS]):
        if block_k <= 0 or a.shape[1] > block_k * MOST_STEPS:
            continue
        twin = float16_running_sum(a, b, block_k).double()
        if bool(((yours - twin).abs() <= atol + rtol * twin.abs()).all()):
            return (
                f"{exp.name} is, within the tolerance, a @ b summed in a float16 accumulator over blocks of "
                f"{block_k} along K: your running sum is float16, which keeps 11 bits and loses the small products "
                "as the sum grows. Keep the accumulator in float32 (tl.zeros(..., dtype=tl.float32), and tl.dot's "
                "float32 result added to it) and convert to float16 only when you store."
            )
    return None
