"""The decoding keys (puzzles 11, 12, 13) at other launch shapes, beside SDPA, under CUDA graph replay.

GPU only: `python -m bench tune-launch --out tune-launch.json [--puzzles 11,12,13] [--quick]`.

Part 1, launch shapes: for each bench shape (D = 128, 32 query heads; B in {1, 8}; N in {4096, 16384,
65536, 131072}; 11 with 32 kv heads, 12 and 13 with 8, 13 in pages of 16 and 64 keys) it times the key's
own host function at one of (programs per SM, BLOCK_N, num_warps, num_stages) through
`bench.decoding_launch.at_launch_shape`, one call captured in a CUDA graph, `graph.replay()` timed
with `triton.testing.do_bench` (median). Every row's output is compared with the key's own first.
SDPA's flash and cuDNN backends are timed the same way (13's on the same keys stored contiguously).

The host time of a call and puzzle 12's key in one launch were measured by an earlier version of this tool (its
findings: bench/tuning.md, "The host time of a Python call" and "What one launch would save").
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
from pathlib import Path
from typing import Any

import torch
import triton

from bench.decoding_launch import FUNCTIONS, H_Q, ROOT, at_launch_shape, draw, graph_us, key_args, load_key, sdpa_call

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
    for per_sm, block_n, warps, stages, min_blocks in [] if quick else grid:
        label = f"{per_sm}/{block_n}/{warps}/{stages}" + (f"/min{min_blocks}" if min_blocks != 4 else "")
        try:
            call = at_launch_shape(key, puzzle, per_sm, block_n, warps, stages, min_blocks)
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
    for r in timed[:6] + [r for r in timed[6:] if r["what"] in ("key", "sdpa cudnn", "sdpa flash")]:
        print(f"  {r['what']:<14} {r['us']:9.1f} µs  {best_sdpa / r['us']:5.2f}x", flush=True)
    del inputs, args, ref
    torch.cuda.empty_cache()
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench tune-launch", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--puzzles", default="11,12,13")
    parser.add_argument("--quick", action="store_true", help="B = 1, N in {4096, 131072}, no launch-shape sweep")
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
    keys = {p: load_key(p, args.keys) for p in puzzles}
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}", flush=True)
    found: dict[str, Any] = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                             "triton": triton.__version__, "rows": []}  # fmt: skip
    batches, lengths = (tuple(int(x) for x in text.split(",")) for text in (args.batches, args.lengths))
    for shape in shapes(puzzles, args.quick, batches, lengths):
        found["rows"] += sweep(shape, keys[shape["puzzle"]], args.quick, grid)
        args.out.write_text(json.dumps(found, indent=1))
    args.out.write_text(json.dumps(found, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
