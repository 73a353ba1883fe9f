"""Puzzle 12: decoding with grouped-query attention: H_q = G * H_kv query heads, G of them per head of K and V.

A case gives B, H_kv, G, N, D and optionally `sm_scale`, `layout_q`, `layout`, `layout_k`, `layout_v`,
`score_std`, `offset` and `lead` as puzzle 11 (`lead` in the odd query heads). Query head h reads the keys and values
of head h // G.
"""

from __future__ import annotations

from typing import Any

import torch

from checks.memory import Arena
from checks.puzzles import BaselineFn, Expected, Work
from checks.puzzles.p11_flash_decoding import (
    LSE_DIMS,
    O_DIMS,
    decoding_reference,
    draw_decoding,
    flex_decoding,
    kv_work,
    sdpa,
    sdpa_backends,
)
from checks.registry import Case


def make_inputs(case: Case, arena: Arena) -> dict[str, Any]:
    return draw_decoding(case, arena, case.G * case.H_kv, case.H_kv)


def reference(inputs: dict[str, Any]) -> list[Expected]:
    o, lse = decoding_reference(inputs["q"], inputs["k"], inputs["v"], inputs["sm_scale"])
    return [Expected("o", o, torch.float16, O_DIMS), Expected("lse", lse, torch.float32, LSE_DIMS)]


def baseline(inputs: dict[str, Any]) -> BaselineFn:
    q, k, v, scale = inputs["q"], inputs["k"], inputs["v"], inputs["sm_scale"]
    return lambda: sdpa(q, k, v, scale, enable_gqa=True)


def baselines(inputs: dict[str, Any]) -> dict[str, BaselineFn]:
    q, k, v, scale = inputs["q"], inputs["k"], inputs["v"], inputs["sm_scale"]
    return {**sdpa_backends(q, k, v, scale, enable_gqa=True), **flex_decoding(q, k, v, scale, enable_gqa=True)}


def work(inputs: dict[str, Any]) -> Work:
    b, h_kv, n, d = inputs["k"].shape
    return kv_work(b * n, d, h_kv, inputs["k"].element_size())
