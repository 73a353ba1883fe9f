"""Each puzzle's inputs at the largest sizes its contract names (`largest:` in puzzles.yaml), without their storage.

The data (every float tensor) is made on torch's meta device: shapes, strides and dtypes, and no memory, so that a
KV cache of 2^32 elements costs nothing. What the host function and the kernels read by value is real and small, on
the grading device: a paged cache's `block_table` and `seq_lens`. The sequences are short (two pages each), and
their pages are the last ones of the cache: the offsets a kernel computes reach the cache's far end, and each
program has little to do. `checks.engine.record.largest` records the learner's plan on these inputs, and
`checks.engine.replay.overflow` runs the programs at the ends of its grids on them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from checks.registry import Case, Puzzle

META = "meta"


def data(shape: tuple[int, ...], dtype: torch.dtype = torch.float16) -> torch.Tensor:
    """A contiguous tensor of this shape with no storage behind it."""
    return torch.empty(shape, dtype=dtype, device=META)


def scale(case: Case) -> float:
    return float(case.sm_scale or 1.0 / math.sqrt(int(case.D)))


def attention(case: Case, device: str) -> dict[str, Any]:
    """q, k, v (B, H, N, D) float16 and sm_scale: 8a, 8, 9a."""
    shape = (int(case.B), int(case.H), int(case.N), int(case.D))
    return {"q": data(shape), "k": data(shape), "v": data(shape), "sm_scale": scale(case)}


def paged_layout(case: Case) -> tuple[int, int, int]:
    """(num_pages, max_pages, tokens per sequence) of a paged case: B sequences of up to N tokens fill the cache; the
    probe's sequences hold one page and one token each."""
    page_size = int(case.page_size)
    max_pages = math.ceil(int(case.N) / page_size)
    return int(case.B) * max_pages, max_pages, page_size + 1


def block_table(case: Case, device: str) -> torch.Tensor:
    """(B, max_pages) int32: sequence b's pages counted down from the end of the cache, so that the first sequence
    reads the last pages and every page number of the cache appears once."""
    num_pages, max_pages, _ = paged_layout(case)
    table = num_pages - 1 - torch.arange(num_pages, dtype=torch.int64).reshape(int(case.B), max_pages)
    return table.to(torch.int32).to(device)


def paged_decoding(case: Case, device: str) -> dict[str, Any]:
    """13: q (B, G·H_kv, D); k_cache, v_cache (num_pages, page_size, H_kv, D); block_table; seq_lens; sm_scale."""
    b, h_kv, d, page_size = int(case.B), int(case.H_kv), int(case.D), int(case.page_size)
    num_pages, _, tokens = paged_layout(case)
    return {
        "q": data((b, int(case.G) * h_kv, d)),
        "k_cache": data((num_pages, page_size, h_kv, d)),
        "v_cache": data((num_pages, page_size, h_kv, d)),
        "block_table": block_table(case, device),
        "seq_lens": torch.full((b,), tokens, dtype=torch.int32, device=device),
        "sm_scale": scale(case),
    }


MAKERS: dict[str, Callable[[Case, str], dict[str, Any]]] = {
    "attention_one_block": attention,
    "paged_decoding": paged_decoding,
}


def largest_inputs(puzzle: Puzzle, device: str) -> dict[str, Any] | None:
    """The arguments of the puzzle's function at its largest sizes, in order; None for a puzzle without them."""
    maker = MAKERS.get(puzzle.slug)
    if maker is None or puzzle.largest is None:
        return None
    return maker(puzzle.largest, device)


def elements(inputs: dict[str, Any]) -> dict[str, int]:
    """name -> elements of each tensor input: what the report says of the sizes."""
    return {name: t.numel() for name, t in inputs.items() if isinstance(t, torch.Tensor)}
