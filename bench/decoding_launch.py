"""What the decoding tools (puzzles 11, 12 and 13) share: the answer keys loaded from solutions/, their inputs, a
call of a key at another launch shape, and the timers (a CUDA graph's replay, a Python call's host time).

A key is always called through its own host function and its own kernels: `at_launch_shape` only replaces the
key's `launch_shape` (the split of the keys) for the length of one call and adds `num_warps` and `num_stages` to
its split kernel's launch, or puts another split kernel of the same signature in its place (puzzle 11's vector
form, in `bench.tune_flash_decoding`). `decoding-graphs`, `tune-launch` and `tune-flash-decoding` time through it.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from checks.engine.submission import load_module

ROOT = Path(__file__).resolve().parent.parent
KEYS = {"11": "11_flash_decoding.py", "12": "12_gqa_decoding.py", "13": "13_paged_decoding.py"}
FUNCTIONS = {"11": "flash_decoding", "12": "gqa_decoding", "13": "paged_decoding"}
D, H_Q = 128, 32
INTERPRETER_SMS = 132  # the keys' own choice in Triton's interpreter: split as for an H100


def load_key(puzzle: str, folder: Path = ROOT / "solutions") -> ModuleType:
    """An answer key, imported from its file (Triton compiles kernels from their source file)."""
    return load_module(folder / KEYS[puzzle], f"key_{puzzle}")


def key_args(puzzle: str, inputs: dict[str, Any]) -> list[Any]:
    """The arguments of puzzle's answer key, in order, from inputs drawn by `draw`."""
    names = ["q", "k_cache", "v_cache", "block_table", "seq_lens"] if puzzle == "13" else ["q", "k", "v"]
    return [inputs[name] for name in names] + [inputs["sm_scale"]]


def key_call(key: ModuleType, puzzle: str, inputs: dict[str, Any]) -> Callable[[], Any]:
    """One call of `key`, puzzle's answer key (or a module with the same function), on inputs drawn by `draw`."""
    return functools.partial(getattr(key, FUNCTIONS[puzzle]), *key_args(puzzle, inputs))


def draw(shape: dict[str, Any], device: str = "cuda", d: int = D, h_q: int = H_Q) -> dict[str, Any]:
    """Fresh random q (B, H_q, D) and k, v (B, H_kv, N, D), float16; for puzzle 13 (a `page_size`) also the same
    keys in scattered pages of a cache, its block table and sequence lengths."""
    import torch

    b, h_kv, n, size = shape["B"], shape["H_kv"], shape["N"], shape.get("page_size", 0)
    on = {"device": device, "dtype": torch.float16}
    inputs: dict[str, Any] = {"q": torch.randn(b, h_q, d, **on), "sm_scale": 1.0 / math.sqrt(d)}
    if not size:
        inputs["k"], inputs["v"] = (torch.randn(b, h_kv, n, d, **on) for _ in range(2))
        return inputs
    pages = math.ceil(n / size)
    table = torch.randperm(b * pages + 1, device=device)[: b * pages].view(b, pages).to(torch.int32)
    for name in ("k", "v"):
        cache = torch.randn(b * pages + 1, size, h_kv, d, **on)  # one page no sequence uses
        inputs[f"{name}_cache"] = cache
        inputs[name] = cache[table.long()].reshape(b, pages * size, h_kv, d)[:, :n].transpose(1, 2).contiguous()
    inputs["block_table"] = table
    inputs["seq_lens"] = torch.full((b,), n, dtype=torch.int32, device=device)
    return inputs


def split_count(n_ctx: int, heads: int, block_n: int, per_sm: int, sms: int, min_blocks: int) -> tuple[int, int]:
    """(BLOCK_N, keys per split) as the keys compute them: about `per_sm` programs per SM, at least `min_blocks`
    blocks of `block_n` keys per split."""
    n_blocks = -(-n_ctx // block_n)
    splits = max(1, min(-(-n_blocks // min_blocks), -(-per_sm * sms // heads)))
    return block_n, -(-n_blocks // splits) * block_n


class _WithLaunchOptions:
    """A kernel whose launches get num_warps and num_stages set (over the key's own, where it gives them)."""

    def __init__(self, kernel: Any, warps: int, stages: int) -> None:
        self.kernel, self.warps, self.stages = kernel, warps, stages

    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        def launch(*args: Any, **kwargs: Any) -> Any:
            return self.kernel[grid](*args, **{**kwargs, "num_warps": self.warps, "num_stages": self.stages})

        return launch


def at_launch_shape(
    key: ModuleType,
    puzzle: str,
    per_sm: int,
    block_n: int,
    warps: int,
    stages: int,
    min_blocks: int = 4,
    split_kernel: Any = None,
) -> Callable[..., Any]:
    """The key's host function at another launch shape: its own arithmetic for the splits with other numbers
    (`per_sm` programs per SM, blocks of `block_n` keys, at least `min_blocks` per split), its split kernel (or
    `split_kernel`, of the same signature) launched with `warps` and `stages`. Returns what the key returns."""

    def sms_of(device: Any) -> int:
        if getattr(device, "type", "cpu") != "cuda":
            return INTERPRETER_SMS
        import torch

        return torch.cuda.get_device_properties(device).multi_processor_count

    def launch_shape(*args: Any) -> tuple[int, ...]:
        if puzzle == "13":
            max_len, page_size, heads, device = args
            n_ctx, block = max_len, max(block_n, page_size)
        else:
            n_ctx, heads, device = args
            block = block_n
        shape = split_count(n_ctx, heads, block, per_sm, sms_of(device), min_blocks)
        return shape if puzzle == "11" else (*shape, stages)  # 12 and 13 say their num_stages too

    kernel = _WithLaunchOptions(split_kernel or key._attn_decode_split, warps, stages)

    def call(*args: Any) -> Any:
        saved = key.launch_shape, key._attn_decode_split
        key.launch_shape, key._attn_decode_split = launch_shape, kernel
        try:
            return getattr(key, FUNCTIONS[puzzle])(*args)
        finally:
            key.launch_shape, key._attn_decode_split = saved

    return call


def one_split(key: ModuleType, call: Callable[[], Any]) -> Callable[[], Any]:
    """`call` with the key's `launch_shape` asking for a single split per head (FlashAttention's decoding
    before split-KV: one program walks every key of its head)."""
    chosen = key.launch_shape

    def whole(n_ctx: int, heads: int, device: Any) -> tuple[int, ...]:
        block_n, _, *rest = chosen(n_ctx, heads, device)
        return block_n, -(-n_ctx // block_n) * block_n, *rest

    def call_one() -> Any:
        key.launch_shape = whole
        try:
            return call()
        finally:
            key.launch_shape = chosen

    return call_one


def graph_us(fn: Callable[[], Any]) -> float:
    """One call of fn captured in a CUDA graph; the median time of its replay, in µs."""
    import torch
    import triton

    fn()  # compile and warm up outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    torch.cuda.synchronize()
    return 1e3 * float(triton.testing.do_bench(graph.replay, warmup=25, rep=100, return_mode="median"))


def host_us(fn: Callable[[], Any], calls: int) -> float:
    """Wall time per Python call: `calls` calls, then one synchronize, divided by `calls`, in µs."""
    import torch

    fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return 1e6 * (time.perf_counter() - start) / calls


def sdpa_call(inputs: dict[str, Any], backend: Any) -> Callable[[], Any]:
    """One call of SDPA held to `backend` on the contiguous q, k, v of `inputs` (GQA through enable_gqa)."""
    import torch
    from torch.nn.attention import sdpa_kernel

    q, k, v, scale = inputs["q"].unsqueeze(2), inputs["k"], inputs["v"], inputs["sm_scale"]
    gqa = q.shape[1] != k.shape[1]

    def call() -> Any:
        with sdpa_kernel(backend):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=scale, enable_gqa=gqa)

    return call


def why(exc: BaseException) -> str:
    """An exception in one short line: its type and the start of its message."""
    text = str(exc).splitlines()[0][:80] if str(exc) else ""
    return f"{type(exc).__name__}: {text}"
