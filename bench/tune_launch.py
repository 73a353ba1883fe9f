"""The decoding keys (puzzles 11, 12, 13) at other launch shapes, and where a Python call's host time goes.

GPU only: `python3 bench/tune_launch.py --out tune-launch.json [--puzzles 11,12,13] [--quick]`.

Part 1, launch shapes: for each bench shape (D = 128, 32 query heads; B in {1, 8}; N in {4096, 16384,
65536, 131072}; 11 with 32 kv heads, 12 and 13 with 8, 13 in pages of 16 and 64 keys) it times the key's
own host function with its `launch_shape` replaced by one of (programs per SM, BLOCK_N) and its split
kernel launched with (num_warps, num_stages), one call captured in a CUDA graph, `graph.replay()` timed
with `triton.testing.do_bench` (median). Every row's output is compared with the key's own first.
SDPA's flash and cuDNN backends are timed the same way (13's on the same keys stored contiguously).

Part 2, host time (skipped with --no-host): bench/host_time.py's first part (`part_host`), which times each step of
a key's call, each key, SDPA and the one-launch candidate. The sweep times that candidate too, as `one_launch`
(bench/candidates/12_one_launch.py, its counters made zero in each call).
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import triton

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.decoding_graphs import FUNCTIONS, H_Q, KEYS, draw, graph_us, key_args, sdpa_call  # noqa: E402
from bench.host_time import ONE_LAUNCH, part_host  # noqa: E402
from checks.engine.submission import load_module  # noqa: E402

one_launch = functools.partial(ONE_LAUNCH.gqa_decoding, counters="zeros")  # as this tool times it: no kept state

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
            return getattr(key, FUNCTIONS[puzzle])(*args)
        finally:
            key.launch_shape, key._attn_decode_split = saved

    return call


def sweep(shape: dict[str, Any], key: Any, quick: bool, grid: list[tuple[int, ...]]) -> list[dict[str, Any]]:
    from torch.nn.attention import SDPBackend

    puzzle = shape["puzzle"]
    inputs = draw(shape)
    args = key_args(puzzle, inputs)
    fn = getattr(key, FUNCTIONS[puzzle])
    ref = fn(*args)
    rows = [{**shape, "what": "key", "us": graph_us(functools.partial(fn, *args))}]
    for backend, label in ((SDPBackend.CUDNN_ATTENTION, "sdpa cudnn"), (SDPBackend.FLASH_ATTENTION, "sdpa flash")):
        sdpa = sdpa_call(inputs, backend)
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
    parser.add_argument("--keys", type=Path, default=ROOT / "solutions", help="load the keys from this folder")
    args = parser.parse_args(argv)
    texts = (args.per_sm, args.blocks, args.warps, args.stages, args.min_blocks)
    numbers = [[int(x) for x in text.split(",")] for text in texts]
    grid = list(itertools.product(*numbers))
    puzzles = [p for p in args.puzzles.split(",") if p]
    keys = {p: load_module(args.keys / KEYS[p], f"key_{p}") for p in puzzles}
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}", flush=True)
    host = [] if args.no_host else part_host(keys)
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
