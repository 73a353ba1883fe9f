"""The decoding keys (puzzles 11, 12, 13) at other launch shapes, and where a Python call's host time goes.

GPU only: `python3 bench/tune_launch.py --out tune-launch.json [--puzzles 11,12,13] [--quick]`.

Part 1, launch shapes: for each bench shape (D = 128, 32 query heads; B in {1, 8}; N in {4096, 16384,
65536, 131072}; 11 with 32 kv heads, 12 and 13 with 8, 13 in pages of 16 and 64 keys) it times the key's
own host function with its `launch_shape` replaced by one of (programs per SM, BLOCK_N) and its split
kernel launched with (num_warps, num_stages), one call captured in a CUDA graph, `graph.replay()` timed
with `triton.testing.do_bench` (median). Every row's output is compared with the key's own first.
SDPA's flash and cuDNN backends are timed the same way (13's on the same keys stored contiguously).

Part 2, host time: Python's time per call (200 calls queued, the GPU not waited for inside the timed loop)
of each key, of each step of its call, of SDPA, and of `one_launch`: puzzle 12's key with the merge done by
the last of each head's splits to finish (an atomic counter), one Triton launch instead of two.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import triton
import triton.language as tl

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.decoding_graphs import graph_us  # noqa: E402 - one call in a CUDA graph, its replay's median in µs
from checks.engine.submission import load_module  # noqa: E402

KEYS = {"11": "11_flash_decoding.py", "12": "12_gqa_decoding.py", "13": "13_paged_decoding.py"}
D, H_Q = 128, 32
PER_SM = (2, 4, 8)
BLOCKS_N = (64, 128)
WARPS = (4, 8)
STAGES = (2, 3, 4)
MIN_BLOCKS = (4,)


def shapes(
    puzzles: list[str],
    quick: bool,
    batches: tuple[int, ...] = (1, 8),
    lengths: tuple[int, ...] = (4096, 16384, 65536, 131072),
) -> list[dict[str, Any]]:
    batches, lengths = ((1,), (4096, 131072)) if quick else (batches, lengths)
    return [
        {"puzzle": p, "B": b, "H_kv": H_Q if p == "11" else 8, "N": n, "page_size": size}
        for p in puzzles
        for size in ((16, 64) if p == "13" else (0,))
        for b in batches
        for n in lengths
    ]


def draw(shape: dict[str, Any]) -> dict[str, Any]:
    """Fresh random inputs; for 13 the keys in scattered pages and the same keys contiguous (for SDPA)."""
    b, h_kv, n, size = shape["B"], shape["H_kv"], shape["N"], shape["page_size"]
    cuda = {"device": "cuda", "dtype": torch.float16}
    found: dict[str, Any] = {"q": torch.randn(b, H_Q, D, **cuda)}
    if not size:
        found["k"], found["v"] = (torch.randn(b, h_kv, n, D, **cuda) for _ in range(2))
        found["sm_scale"] = 1.0 / math.sqrt(D)
        return found
    pages = math.ceil(n / size)
    table = torch.randperm(b * pages + 1, device="cuda")[: b * pages].view(b, pages).to(torch.int32)
    for name in ("k", "v"):
        cache = torch.randn(b * pages + 1, size, h_kv, D, **cuda)
        found[f"{name}_cache"] = cache
        found[name] = cache[table.long()].reshape(b, pages * size, h_kv, D)[:, :n].transpose(1, 2).contiguous()
    found["block_table"] = table
    found["seq_lens"] = torch.full((b,), n, dtype=torch.int32, device="cuda")
    found["sm_scale"] = 1.0 / math.sqrt(D)
    return found


def key_args(puzzle: str, inputs: dict[str, Any]) -> list[Any]:
    names = ["q", "k_cache", "v_cache", "block_table", "seq_lens"] if puzzle == "13" else ["q", "k", "v"]
    return [inputs[name] for name in names] + [inputs["sm_scale"]]


def host_us(fn: Callable[[], Any], calls: int = 200) -> float:
    """Python's time per call: the launches queue up, the GPU is not waited for inside the loop."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(3):  # the least of three loops: other work on the host only adds time
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, time.perf_counter() - start)
        torch.cuda.synchronize()
    return 1e6 * best / calls


class Launched:
    """A kernel whose launches get num_warps and num_stages added."""

    def __init__(self, kernel: Any, warps: int, stages: int) -> None:
        self.kernel, self.warps, self.stages = kernel, warps, stages

    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        def launch(*args: Any, **kwargs: Any) -> Any:  # the sweep's options over the key's own
            return self.kernel[grid](*args, **{**kwargs, "num_warps": self.warps, "num_stages": self.stages})

        return launch


def with_launch(
    key: Any, puzzle: str, per_sm: int, block_n: int, warps: int, stages: int, min_blocks: int = 4
) -> Callable[..., Any]:
    """The key's host function at another launch shape (its own arithmetic for the splits, other numbers)."""
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    split_kernel = key._attn_decode_split

    def shape_of(n_ctx: int, heads: int, block: int) -> tuple[int, ...]:
        n_blocks = triton.cdiv(n_ctx, block)
        splits = max(1, min(triton.cdiv(n_blocks, min_blocks), triton.cdiv(per_sm * sms, heads)))
        shape = block, triton.cdiv(n_blocks, splits) * block
        return shape if puzzle == "11" else (*shape, stages)  # 12 and 13 say their num_stages too

    def launch_shape(*args: Any) -> tuple[int, ...]:
        if puzzle == "13":
            max_len, page_size, heads, _ = args
            return shape_of(max_len, heads, max(block_n, page_size))
        n_ctx, heads, _ = args
        return shape_of(n_ctx, heads, block_n)

    def call(*args: Any) -> Any:
        saved = key.launch_shape, key._attn_decode_split
        key.launch_shape, key._attn_decode_split = launch_shape, Launched(split_kernel, warps, stages)
        try:
            return getattr(key, {"11": "flash_decoding", "12": "gqa_decoding", "13": "paged_decoding"}[puzzle])(*args)
        finally:
            key.launch_shape, key._attn_decode_split = saved

    return call


@triton.jit
def _one_launch(
    q_ptr, k_ptr, v_ptr, o_part_ptr, lse_part_ptr, count_ptr, o_ptr, lse_ptr, qk_scale,
    stride_qz, stride_qh, stride_qk, stride_kz, stride_kh, stride_kn, stride_kk,
    stride_vz, stride_vh, stride_vn, stride_vk, stride_oz, stride_oh, stride_ok,
    H_KV, N_CTX, SPLIT_SIZE, NUM_SPLITS,
    GROUP: tl.constexpr, BLOCK_G: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr,
    SPLITS_POW2: tl.constexpr,
):  # fmt: skip
    split = tl.program_id(0)
    off_hz = tl.program_id(1)
    off_z = off_hz // H_KV
    off_h = off_hz % H_KV
    offs_g = tl.arange(0, BLOCK_G)
    offs_d = tl.arange(0, HEAD_DIM)
    mask_g = offs_g < GROUP
    q = tl.load(q_ptr + off_z * stride_qz + (off_h * GROUP + offs_g)[:, None] * stride_qh + offs_d[None, :] * stride_qk,
                mask=mask_g[:, None], other=0.0)  # fmt: skip
    k_base = k_ptr + off_z.to(tl.int64) * stride_kz + off_h.to(tl.int64) * stride_kh
    v_base = v_ptr + off_z.to(tl.int64) * stride_vz + off_h.to(tl.int64) * stride_vh
    m_i = tl.full((BLOCK_G,), float("-inf"), tl.float32)
    l_i = tl.zeros((BLOCK_G,), tl.float32)
    acc = tl.zeros((BLOCK_G, HEAD_DIM), tl.float32)
    lo = split * SPLIT_SIZE
    hi = tl.minimum(lo + SPLIT_SIZE, N_CTX)
    for start_n in range(lo, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        mask_n = offs_n < hi
        k = tl.load(k_base + offs_n[:, None] * stride_kn + offs_d[None, :] * stride_kk, mask=mask_n[:, None], other=0.0)
        qk = tl.dot(q, tl.trans(k)) * qk_scale
        qk = tl.where(mask_n[None, :], qk, float("-inf"))
        m_ij = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_ij[:, None])
        alpha = tl.math.exp2(m_i - m_ij)
        v = tl.load(v_base + offs_n[:, None] * stride_vn + offs_d[None, :] * stride_vk, mask=mask_n[:, None], other=0.0)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        m_i = m_ij
    heads = off_z * H_KV * GROUP + off_h * GROUP + offs_g
    parts = heads * NUM_SPLITS + split
    tl.store(o_part_ptr + parts[:, None] * HEAD_DIM + offs_d[None, :], acc / l_i[:, None], mask=mask_g[:, None])
    tl.store(lse_part_ptr + parts, m_i + tl.math.log2(l_i), mask=mask_g)
    # the last of this head's splits to finish (its partials stored before the count) merges them all
    if tl.atomic_add(count_ptr + off_hz, 1, sem="acq_rel") == NUM_SPLITS - 1:
        offs_s = tl.arange(0, SPLITS_POW2)
        mask_s = offs_s < NUM_SPLITS
        for g in tl.static_range(GROUP):
            head = off_z * H_KV * GROUP + off_h * GROUP + g
            lse_s = tl.load(lse_part_ptr + head * NUM_SPLITS + offs_s, mask=mask_s, other=float("-inf"))
            o_s = tl.load(o_part_ptr + (head * NUM_SPLITS + offs_s[:, None]) * HEAD_DIM + offs_d[None, :],
                          mask=mask_s[:, None], other=0.0)  # fmt: skip
            m = tl.max(lse_s, 0)
            w = tl.math.exp2(lse_s - m)
            l_sum = tl.sum(w, 0)
            o = tl.sum(w[:, None] * o_s, 0) / l_sum
            tl.store(o_ptr + off_z * stride_oz + (off_h * GROUP + g) * stride_oh + offs_d * stride_ok,
                     o.to(o_ptr.dtype.element_ty))  # fmt: skip
            tl.store(lse_ptr + head, (m + tl.math.log2(l_sum)) * 0.6931471805599453)


@functools.cache
def sm_count(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


def one_launch(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, sm_scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Puzzle 12's key in one launch: partials, a zeroed counter per (batch, kv head), the merge in-kernel."""
    B, H_kv, N, D_ = k.shape
    H_q = q.shape[1]
    group = H_q // H_kv
    block_n = 64
    n_blocks = triton.cdiv(N, block_n)
    splits = max(1, min(triton.cdiv(n_blocks, 4), triton.cdiv(2 * sm_count(q.device.index or 0), B * H_kv)))
    split_size = triton.cdiv(n_blocks, splits) * block_n
    num_splits = triton.cdiv(N, split_size)
    o_part = torch.empty((B * H_q, num_splits, D_), dtype=torch.float32, device=q.device)
    lse_part = torch.empty((B * H_q, num_splits), dtype=torch.float32, device=q.device)
    count = torch.zeros((B * H_kv,), dtype=torch.int32, device=q.device)
    o = torch.empty((B, H_q, D_), dtype=q.dtype, device=q.device)
    lse = torch.empty((B, H_q), dtype=torch.float32, device=q.device)
    _one_launch[(num_splits, B * H_kv)](
        q, k, v, o_part, lse_part, count, o, lse, sm_scale * 1.4426950408889634,
        *q.stride(), *k.stride(), *v.stride(), *o.stride(), H_kv, N, split_size, num_splits,
        GROUP=group, BLOCK_G=max(16, triton.next_power_of_2(group)), HEAD_DIM=D_, BLOCK_N=block_n,
        SPLITS_POW2=triton.next_power_of_2(num_splits),
    )  # fmt: skip
    return o, lse


@triton.jit
def _few_args(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


@triton.jit
def _many_args(x_ptr, y_ptr, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19,
               a20, n, BLOCK: tl.constexpr):  # fmt: skip
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def host_parts(keys: dict[str, Any]) -> list[dict[str, Any]]:
    """Host µs per call of each key, each step, SDPA and one_launch, at B = 1, N = 4096 (the GPU's work is short)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    rows = []
    x = torch.randn(1024, device="cuda")
    y = torch.empty_like(x)
    steps: dict[str, Callable[[], Any]] = {
        "Triton launch, 3 arguments": lambda: _few_args[(1,)](x, y, 1000, BLOCK=1024),
        "Triton launch, 23 arguments": lambda: _many_args[(1,)](x, y, *range(3, 23), 1000, BLOCK=1024),
        "torch.empty (4096 floats)": lambda: torch.empty((32, 128), dtype=torch.float32, device="cuda"),
        "torch.zeros (8 ints)": lambda: torch.zeros((8,), dtype=torch.int32, device="cuda"),
        "torch.cuda.get_device_properties": lambda: torch.cuda.get_device_properties(x.device).multi_processor_count,
        "sm_count (functools.cache)": lambda: sm_count(0),
    }
    for name, step in steps.items():
        rows.append({"what": name, "host_us": host_us(step)})
    for puzzle, key in keys.items():
        shape = {"puzzle": puzzle, "B": 1, "H_kv": H_Q if puzzle == "11" else 8, "N": 4096,
                 "page_size": 16 if puzzle == "13" else 0}  # fmt: skip
        inputs = draw(shape)
        fn = getattr(key, {"11": "flash_decoding", "12": "gqa_decoding", "13": "paged_decoding"}[puzzle])
        args = key_args(puzzle, inputs)
        rows.append({"what": f"key {puzzle}, B=1 N=4096", "host_us": host_us(lambda fn=fn, args=args: fn(*args)),
                     "graph_us": graph_us(lambda fn=fn, args=args: fn(*args))})  # fmt: skip
        q, k, v = inputs["q"].unsqueeze(2), inputs["k"], inputs["v"]
        gqa = q.shape[1] != k.shape[1]
        for backend, label in ((SDPBackend.CUDNN_ATTENTION, "cudnn"), (SDPBackend.FLASH_ATTENTION, "flash")):

            def sdpa(backend: Any = backend, q: Any = q, k: Any = k, v: Any = v, gqa: bool = gqa) -> Any:
                with sdpa_kernel(backend):
                    return torch.nn.functional.scaled_dot_product_attention(q, k, v, enable_gqa=gqa)

            try:
                rows.append({"what": f"SDPA {label}, as {puzzle}'s B=1 N=4096", "host_us": host_us(sdpa)})
            except RuntimeError as exc:
                rows.append({"what": f"SDPA {label}, as {puzzle}'s", "note": str(exc)[:100]})
        if puzzle == "12":
            ref = fn(*args)
            got = one_launch(*args)
            torch.cuda.synchronize()
            same = bool(torch.allclose(got[0].float(), ref[0].float(), atol=2e-2)
                        and torch.allclose(got[1], ref[1], atol=1e-3))  # fmt: skip
            rows.append({"what": "one_launch (12, merge in the last split), B=1 N=4096",
                         "host_us": host_us(functools.partial(one_launch, *args)),
                         "graph_us": graph_us(functools.partial(one_launch, *args)),
                         "matches_key": same})  # fmt: skip
    for row in rows:
        print(f"  host: {row['what']:<58} {row.get('host_us', float('nan')):8.1f} µs"
              + (f"   graph {row['graph_us']:.1f} µs" if "graph_us" in row else "")
              + (f"   matches the key: {row['matches_key']}" if "matches_key" in row else ""), flush=True)  # fmt: skip
    return rows


def sweep(shape: dict[str, Any], key: Any, quick: bool, grid: list[tuple[int, ...]]) -> list[dict[str, Any]]:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    puzzle = shape["puzzle"]
    inputs = draw(shape)
    args = key_args(puzzle, inputs)
    fn = getattr(key, {"11": "flash_decoding", "12": "gqa_decoding", "13": "paged_decoding"}[puzzle])
    ref = fn(*args)
    rows = [{**shape, "what": "key", "us": graph_us(functools.partial(fn, *args))}]
    q, k, v, scale = inputs["q"].unsqueeze(2), inputs["k"], inputs["v"], inputs["sm_scale"]
    gqa = q.shape[1] != k.shape[1]
    for backend, label in ((SDPBackend.CUDNN_ATTENTION, "sdpa cudnn"), (SDPBackend.FLASH_ATTENTION, "sdpa flash")):

        def sdpa(backend: Any = backend) -> Any:
            with sdpa_kernel(backend):
                return torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=scale, enable_gqa=gqa)

        try:
            rows.append({**shape, "what": label, "us": graph_us(sdpa)})
        except RuntimeError:
            pass
    if puzzle == "12":
        rows.append({**shape, "what": "one_launch", "us": graph_us(functools.partial(one_launch, *args))})
    for per_sm, block_n, warps, stages, min_blocks in [] if quick else grid:
        label = f"{per_sm}/{block_n}/{warps}/{stages}" + (f"/min{min_blocks}" if min_blocks != 4 else "")
        try:
            call = with_launch(key, puzzle, per_sm, block_n, warps, stages, min_blocks)
            out = call(*args)
            torch.cuda.synchronize()
            if not torch.allclose(out[0].float(), ref[0].float(), atol=2e-2, rtol=2e-2):
                rows.append({**shape, "what": label, "us": None, "note": "WRONG"})
                continue
            rows.append({**shape, "what": label, "us": graph_us(functools.partial(call, *args))})
        except Exception as exc:  # noqa: BLE001 - a launch shape that does not compile is a row
            rows.append({**shape, "what": label, "us": None, "note": f"{type(exc).__name__}: {str(exc)[:100]}"})
    best_sdpa = min((r["us"] for r in rows if r["what"].startswith("sdpa") and r["us"]), default=None)
    timed = sorted((r for r in rows if r["us"]), key=lambda r: r["us"])
    head = f"{puzzle}: B={shape['B']} H_kv={shape['H_kv']} N={shape['N']} page={shape['page_size']}"
    print(f"\n{head}  best SDPA {best_sdpa:.1f} µs", flush=True)
    for r in timed[:6] + [r for r in timed[6:] if r["what"] in ("key", "one_launch", "sdpa cudnn", "sdpa flash")]:
        print(f"  {r['what']:<14} {r['us']:9.1f} µs  {best_sdpa / r['us']:5.2f}x", flush=True)
    del inputs, args, ref
    torch.cuda.empty_cache()
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/tune_launch.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--puzzles", default="11,12,13")
    parser.add_argument("--quick", action="store_true", help="B = 1, N in {4096, 131072}, no launch-shape sweep")
    parser.add_argument("--no-sweep", action="store_true", help="host times only")
    parser.add_argument("--no-host", action="store_true", help="the launch shapes only")
    for name, default in (("per-sm", PER_SM), ("blocks", BLOCKS_N), ("warps", WARPS), ("stages", STAGES),
                          ("min-blocks", MIN_BLOCKS)):  # fmt: skip
        parser.add_argument(f"--{name}", default=",".join(map(str, default)), help=f"default {default}")
    parser.add_argument("--batches", default="1,8", help="B of the shapes (default 1,8)")
    parser.add_argument("--lengths", default="4096,16384,65536,131072", help="N of the shapes")
    args = parser.parse_args(argv)
    texts = (args.per_sm, args.blocks, args.warps, args.stages, args.min_blocks)
    numbers = [[int(x) for x in text.split(",")] for text in texts]
    grid = list(itertools.product(*numbers))
    puzzles = [p for p in args.puzzles.split(",") if p]
    keys = {p: load_module(ROOT / "solutions" / KEYS[p], f"key_{p}") for p in puzzles}
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}", flush=True)
    host = [] if args.no_host else host_parts(keys)
    found: dict[str, Any] = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                             "triton": triton.__version__, "host": host, "rows": []}  # fmt: skip
    if not args.no_sweep:
        batches, lengths = (tuple(int(x) for x in text.split(",")) for text in (args.batches, args.lengths))
        for shape in shapes(puzzles, args.quick, batches, lengths):
            found["rows"] += sweep(shape, keys[shape["puzzle"]], args.quick, grid)
            args.out.write_text(json.dumps(found, indent=1))
    args.out.write_text(json.dumps(found, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
