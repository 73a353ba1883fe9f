"""Puzzle 9: FlashAttention-2 forward, o = softmax(q k^T * sm_scale) v and its logsumexp, causal or not.

A case gives B, H, N, D and optionally `causal` (default false), `sm_scale` (default 1/sqrt(D)) and
`layout` ("contiguous" or "bnhd", a (B, N, H, D) tensor viewed as (B, H, N, D)) for all three
inputs, or `layout_q`, `layout_k`, `layout_v` for one of them, and `score_std` (default 1): q and k
are drawn with standard deviation sqrt(score_std) each, so that with the default sm_scale the scaled
scores have standard deviation score_std. `score_std: 100` gives scores of a few hundred, as the
attention logits of real models reach, where exp of a score not first reduced by its row's max
overflows float32. (Scaling q alone would do the same, but in the backward pass the rounding of the
float16 o, carried by delta = rowsum(dO * O), would then reach dK multiplied by |q|.) `offset` (default 0) is added
to the first half of v's head-dim columns: with `score_std` small, so that each row's weights spread over all its
keys, the running sum of p @ v before the division by l grows there to about l times the offset, past float16's
largest value (65504) in a float16 accumulator, while o, about the offset, is representable. `lead` (default none)
makes the first key lead the others by about that much in the odd rows' scaled scores (the even rows keep weights
spread over every key, for `offset`): their running sum l stays near 1 from the first key block on, and a float16 l
loses each later block's small sum, which lse shows.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from checks.memory import Arena, make_input
from checks.puzzles import BaselineFn, Expected, Work, sdpa_held_to
from checks.registry import Case

O_DIMS = ("batch", "heads", "query rows", "head-dim columns")
LSE_DIMS = ("batch", "heads", "query rows")


def draw_qkv(case: Case, arena: Arena) -> dict[str, torch.Tensor]:
    """q, k, v: (B, H, N, D) float16 views in the layouts the case asks for (q and k as `score_std` says, v moved by
    `offset`)."""
    shape = (case.B, case.H, case.N, case.D)
    inputs = {
        name: make_input(arena, shape, torch.float16, name, case.layout_of(name), spread(case, name))
        for name in ("q", "k", "v")
    }
    offset_values(inputs["v"], case)
    lead_first_key(inputs["q"], inputs["k"], case)
    return inputs


def offset_values(v: torch.Tensor, case: Case) -> None:
    """Add the case's `offset` to the first half of v's head-dim columns, in place: their running sums of p @ v grow
    with the keys, while the other half's stay small, so that a float16 accumulator overflows in those columns only
    (and what it gives elsewhere tells it from other causes of inf)."""
    if case.offset:
        v[..., : v.shape[-1] // 2] += case.offset


LEAD_KEY = 8.0  # -k[..., 0] of every key but the first: q[..., 0] sets each row's lead over them
LEAD_SPREAD = 1.5  # the rows' leads run from `lead` - 1.5 to `lead` + 1.5 ...
LEAD_STEPS = 8  # ... in 8 steps, over and over along the rows (a causal case's last rows, which see most keys, too)


def lead_first_key(q: torch.Tensor, k: torch.Tensor, case: Case) -> None:
    """Make the first key lead the others by about the case's `lead` in the odd rows' scaled scores, in place: column
    0 of k is 0 for key 0 and -8 for the others, column 0 of an odd row of q is its lead / (8 sm_scale), the leads
    running from `lead` - 1.5 to `lead` + 1.5 in 8 steps, over and over; column 0 of the even rows is 0, so that their
    weights stay spread over every key. From the first key block on, the running sum l of an odd row is then about 1,
    and each later key block adds about BLOCK_N exp(-lead) to it: in float16, whose spacing near 1 is 2^-10, an
    addition below half of that is lost every time (a larger one rounded to whole steps), while float32 keeps it."""
    if not case.lead:
        return
    lead_rows(q, case)
    k[..., 0] = -LEAD_KEY
    k[..., 0, 0] = 0.0


def lead_rows(q: torch.Tensor, case: Case) -> None:
    """Column 0 of q's rows (along dim -2) as `lead_first_key` sets it, in place: each odd row's lead / (8 sm_scale),
    0 in the even rows."""
    rows = q[..., 1::2, :]  # the even rows keep weights spread over every key (for `offset`)
    steps = torch.arange(rows.shape[-2], device=q.device) % LEAD_STEPS / (LEAD_STEPS - 1)  # 0 to 1, then again
    leads = float(case.lead or 0.0) - LEAD_SPREAD + 2 * LEAD_SPREAD * steps
    rows[..., 0] = (leads / (LEAD_KEY * scale_of(case))).to(q.dtype)
    q[..., ::2, 0] = 0.0


def spread(case: Case, name: str) -> float:
    """The standard deviation of the input `name`'s values: sqrt(score_std) for q and k (and the caches of
    keys), 1 for the others."""
    return math.sqrt(float(case.score_std or 1.0)) if name in ("q", "k", "k_cache") else 1.0


def scale_of(case: Case) -> float:
    return float(case.sm_scale or 1.0 / math.sqrt(case.D))


def make_inputs(case: Case, arena: Arena) -> dict[str, Any]:
    inputs: dict[str, Any] = draw_qkv(case, arena)
    inputs["causal"] = bool(case.causal)
    inputs["sm_scale"] = scale_of(case)
    return inputs


def attention_reference(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, sm_scale: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """(o, lse) in float64 on the CPU, float32 on a GPU: softmax(q k^T * sm_scale) v and logsumexp."""
    wide = torch.float64 if q.device.type == "cpu" else torch.float32
    s = (q.to(wide) @ k.to(wide).transpose(-1, -2)) * sm_scale  # (B, H, N, N)
    if causal:
        n = q.shape[2]
        future = torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1)  # key j > query i
        s = s.masked_fill(future, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)  # (B, H, N)
    o = torch.exp(s - lse[..., None]) @ v.to(wide)  # (B, H, N, D)
    return o, lse


def reference(inputs: dict[str, Any]) -> list[Expected]:
    o, lse = attention_reference(inputs["q"], inputs["k"], inputs["v"], inputs["causal"], inputs["sm_scale"])
    return [Expected("o", o, torch.float16, O_DIMS), Expected("lse", lse, torch.float32, LSE_DIMS)]


def baseline(inputs: dict[str, Any]) -> BaselineFn:
    q, k, v = inputs["q"], inputs["k"], inputs["v"]
    causal, scale = inputs["causal"], inputs["sm_scale"]
    return lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)


def sdpa_backends(inputs: dict[str, Any], causal: bool) -> dict[str, BaselineFn]:
    """`make bench`'s other baselines: SDPA held to its flash and to its cuDNN backend, where they run here."""
    from torch.nn.attention import SDPBackend

    q, k, v, scale = inputs["q"], inputs["k"], inputs["v"], inputs["sm_scale"]
    return sdpa_held_to(
        (("sdpa flash", SDPBackend.FLASH_ATTENTION), ("sdpa cudnn", SDPBackend.CUDNN_ATTENTION)),
        lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale),
    )


def unfused(inputs: dict[str, Any]) -> dict[str, BaselineFn]:
    """`make bench`'s attention without fusion, not causal: S = q k^T and P = softmax(S) written to the GPU's
    memory in float16 and read back, where the two fit in what is free (none on a CPU)."""
    q, k, v, scale = inputs["q"], inputs["k"], inputs["v"], inputs["sm_scale"]
    b, h, n, _ = q.shape
    if (
        inputs["causal"]
        or q.device.type != "cuda"
        or 2 * b * h * n * n * q.element_size() > 0.8 * torch.cuda.mem_get_info()[0]
    ):
        return {}
    return {"torch unfused": lambda: torch.softmax((q @ k.transpose(-1, -2)) * scale, dim=-1) @ v}


def baselines(inputs: dict[str, Any]) -> dict[str, BaselineFn]:
    return {**sdpa_backends(inputs, inputs["causal"]), **unfused(inputs)}


def attention_work(q: torch.Tensor, causal: bool, matmuls: int = 2, tensors: int = 4) -> Work:
    """`matmuls` (N, N, D)-sized products at 2 flops per multiply-add, half when causal; `tensors` (B, H, N, D) moved.

    The forward: q k^T and p v, reading q, k, v and writing o.
    """
    b, h, n, d = q.shape
    flops = matmuls * 2.0 * b * h * n * n * d
    if causal:
        flops /= 2
    return Work(bytes=tensors * b * h * n * d * q.element_size(), flops=flops)


def work(inputs: dict[str, Any]) -> Work:
    return attention_work(inputs["q"], inputs["causal"])


# puzzles.yaml's causal interpreter cases (N = 130) have two key blocks past a diagonal at tiles up to this many rows
SKIPPING_SHOWS_UP_TO = 64


def method_cases(tile: int) -> list[dict[str, Any]]:
    """A causal interpreter case with two key blocks past the first query block's diagonal at tiles (query and key
    blocks) of up to `tile` rows; none where the puzzle's own cases already have them."""
    if tile <= SKIPPING_SHOWS_UP_TO:
        return []
    return [{"B": 1, "H": 1, "N": 3 * tile, "D": 16, "causal": True, "note": f"causal, at tiles up to {tile}"}]
