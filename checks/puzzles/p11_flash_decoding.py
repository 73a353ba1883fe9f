"""Puzzle 11: flash decoding, one query per head against N keys: o = softmax(q k^T * sm_scale) v and its logsumexp.

A case gives B, H, N, D and optionally `sm_scale` (default 1/sqrt(D)), `layout_q` ("contiguous" or
"sliced": a (B, H, D) view of every other column of a wider tensor) and `layout` ("contiguous",
"bnhd": a (B, N, H, D) cache viewed as (B, H, N, D), or "sliced") for k and v, or `layout_k`,
`layout_v` for one of them, and `score_std` as puzzle 9 (scores of a few hundred, where a split or a
merge that does not subtract its max overflows), `offset` as puzzle 9 (v near it: a float16 running sum of
p @ v overflows) and `lead` as puzzle 9, its rows the query heads: each head's first key leads its others in the odd
query heads, so that the running sum l of the split that holds it stays near 1 and a float16 l loses each later key
block's small sum.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from checks.memory import Arena, make_input
from checks.puzzles import BaselineFn, Expected, Work, sdpa_held_to
from checks.puzzles.p09_flash_attention_v2_fwd import lead_first_key, offset_values, spread
from checks.registry import Case

O_DIMS = ("batch", "heads", "head-dim columns")
LSE_DIMS = ("batch", "heads")


def scale_of(case: Case) -> float:
    return float(case.sm_scale or 1.0 / math.sqrt(case.D))


def draw_decoding(case: Case, arena: Arena, heads_q: int, heads_kv: int) -> dict[str, Any]:
    """q (B, heads_q, D); k, v (B, heads_kv, N, D): float16 views in the layouts the case asks for."""
    b, n, d = case.B, case.N, case.D
    layout_q = case.layout_q or "contiguous"  # q is (B, H, D): the shared layout is the cache's
    inputs: dict[str, Any] = {"q": make_input(arena, (b, heads_q, d), torch.float16, "q", layout_q, spread(case, "q"))}
    for name in ("k", "v"):
        layout = case.layout_of(name)
        inputs[name] = make_input(arena, (b, heads_kv, n, d), torch.float16, name, layout, spread(case, name))
    offset_values(inputs["v"], case)
    lead_first_key(inputs["q"], inputs["k"], case)  # q's rows are its heads
    inputs["sm_scale"] = scale_of(case)
    return inputs


def make_inputs(case: Case, arena: Arena) -> dict[str, Any]:
    return draw_decoding(case, arena, case.H, case.H)


def decoding_reference(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, sm_scale: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """(o, lse) in float64 on the CPU, float32 on a GPU, for q (B, H_q, D) and k, v (B, H_kv, N, D), H_q = G H_kv.

    Query head h reads the keys of head h // G (grouped-query attention; G = 1 is puzzle 11).
    """
    wide = torch.float64 if q.device.type == "cpu" else torch.float32
    group = q.shape[1] // k.shape[1]
    kw = k.to(wide).repeat_interleave(group, dim=1)  # (B, H_q, N, D)
    vw = v.to(wide).repeat_interleave(group, dim=1)
    s = torch.einsum("bhd,bhnd->bhn", q.to(wide), kw) * sm_scale  # (B, H_q, N)
    lse = torch.logsumexp(s, dim=-1)  # (B, H_q)
    o = torch.einsum("bhn,bhnd->bhd", torch.exp(s - lse[..., None]), vw)  # (B, H_q, D)
    return o, lse


def reference(inputs: dict[str, Any]) -> list[Expected]:
    o, lse = decoding_reference(inputs["q"], inputs["k"], inputs["v"], inputs["sm_scale"])
    return [Expected("o", o, torch.float16, O_DIMS), Expected("lse", lse, torch.float32, LSE_DIMS)]


def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, **kwargs: Any) -> torch.Tensor:
    """SDPA with one query row per head: q (B, H_q, D) seen as (B, H_q, 1, D); o (B, H_q, D), a view."""
    return torch.nn.functional.scaled_dot_product_attention(q.unsqueeze(2), k, v, scale=scale, **kwargs).squeeze(2)


def baseline(inputs: dict[str, Any]) -> BaselineFn:
    q, k, v, scale = inputs["q"], inputs["k"], inputs["v"], inputs["sm_scale"]
    return lambda: sdpa(q, k, v, scale)


def sdpa_backends(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, **kwargs: Any
) -> dict[str, BaselineFn]:
    """SDPA held to each backend that runs this shape here (flash, cuDNN, efficient, math)."""
    from torch.nn.attention import SDPBackend

    backends = (
        ("sdpa flash", SDPBackend.FLASH_ATTENTION),
        ("sdpa cudnn", SDPBackend.CUDNN_ATTENTION),
        ("sdpa efficient", SDPBackend.EFFICIENT_ATTENTION),
        ("sdpa math", SDPBackend.MATH),
    )
    return sdpa_held_to(backends, lambda: sdpa(q, k, v, scale, **kwargs))


def flex_decoding(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, **kwargs: Any
) -> dict[str, BaselineFn]:
    """FlexAttention compiled with torch.compile (its decoding kernels are Triton), on a GPU only.

    torch._dynamo is reset first: each shape of the sweep compiles afresh instead of reaching the
    recompile limit, past which torch falls back to an unfused path.
    """
    if q.device.type != "cuda":
        return {}
    try:
        import torch._dynamo
        from torch.nn.attention.flex_attention import flex_attention

        torch._dynamo.reset()
        compiled = torch.compile(flex_attention)

        def call() -> torch.Tensor:
            return compiled(q.unsqueeze(2), k, v, scale=scale, **kwargs).squeeze(2)

        call()
    except Exception:  # noqa: BLE001 - no FlexAttention for this shape or build: no such baseline
        return {}
    return {"flex attention": call}


def baselines(inputs: dict[str, Any]) -> dict[str, BaselineFn]:
    q, k, v, scale = inputs["q"], inputs["k"], inputs["v"], inputs["sm_scale"]
    return {**sdpa_backends(q, k, v, scale), **flex_decoding(q, k, v, scale)}


def kv_work(keys: int, d: int, heads_kv: int, element_size: int) -> Work:
    """Bytes of K and V read once: `keys` keys per kv head, summed over the batch. No flops are counted, so
    `make bench` reports GB/s of K and V read, the rate that bounds decoding (q and o add under 1% at N >= 1024)."""
    return Work(bytes=2.0 * keys * heads_kv * d * element_size)


def work(inputs: dict[str, Any]) -> Work:
    b, h, n, d = inputs["k"].shape
    return kv_work(b * n, d, h, inputs["k"].element_size())
