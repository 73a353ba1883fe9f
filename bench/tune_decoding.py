"""Time the decoding answer keys (puzzles 11 and 12) at other launch shapes, beside SDPA's backends.

GPU only: `python3 bench/tune_decoding.py [--puzzles 11,12] [--json PATH]`. For each bench shape it times,
with `triton.testing.do_bench` (median, fresh random inputs):

- SDPA held to its flash and cuDNN backends;
- the answer key as written (a call from Python: what `make bench` and the grader time);
- the answer key replayed from a CUDA graph (the GPU's time alone, without Python's launch cost);
- the answer key's two kernels launched directly at each (programs per SM, BLOCK_N, num_warps, num_stages),
  replayed from a CUDA graph, so that the split and the tile can be chosen from measurements.

It prints each shape's rows best first, as GB/s of K and V read and the ratio to the best SDPA backend.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import sys
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import triton

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from checks.engine.submission import load_module  # noqa: E402
from checks.memory import Arena  # noqa: E402
from checks.puzzles import spec_module  # noqa: E402
from checks.puzzles.p11_flash_decoding import sdpa_backends  # noqa: E402
from checks.registry import get_puzzle  # noqa: E402

SHAPES = {  # the shapes of the decoding benchmark (bench/decoding_graphs.py)
    "11": [{"B": b, "H": 32, "N": n, "D": 128} for b in (1, 8) for n in (4096, 16384, 65536, 131072)],
    "12": [{"B": b, "H_kv": 8, "G": 4, "N": n, "D": 128} for b in (1, 8) for n in (4096, 16384, 65536, 131072)],
}
PER_SM = (2, 4, 8)
BLOCKS_N = (64, 128)
WARPS = (4, 8)
STAGES = (2, 3, 4)


def graphed(fn: Callable[[], Any]) -> Callable[[], Any]:
    """fn captured in a CUDA graph: replaying it costs the GPU's time and one launch."""
    fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay


def ms(fn: Callable[[], Any]) -> float:
    return float(triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median"))


def host_us(fn: Callable[[], Any], calls: int = 200) -> float:
    """Python's time per call (launches queue up; the GPU is not waited for)."""
    fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    spent = time.perf_counter() - start
    torch.cuda.synchronize()
    return 1e6 * spent / calls


def direct(key: Any, puzzle: str, inputs: dict[str, Any], per_sm: int, block_n: int, warps: int, stages: int):
    """The key's two kernels launched at one launch shape (the wrapper's arithmetic, other numbers)."""
    q, k, v, scale = inputs["q"], inputs["k"], inputs["v"], inputs["sm_scale"]
    B, H_kv, N, D = k.shape
    H_q = q.shape[1]
    sms = torch.cuda.get_device_properties(q.device).multi_processor_count
    n_blocks = triton.cdiv(N, block_n)
    splits = max(1, min(triton.cdiv(n_blocks, key.MIN_BLOCKS), triton.cdiv(per_sm * sms, B * H_kv)))
    split_size = triton.cdiv(n_blocks, splits) * block_n
    num_splits = triton.cdiv(N, split_size)
    o_part = torch.empty((B * H_q, num_splits, D), dtype=torch.float32, device=q.device)
    lse_part = torch.empty((B * H_q, num_splits), dtype=torch.float32, device=q.device)
    o = torch.empty((B, H_q, D), dtype=q.dtype, device=q.device)
    lse = torch.empty((B, H_q), dtype=torch.float32, device=q.device)
    extra = {} if puzzle == "11" else {"GROUP": H_q // H_kv, "BLOCK_G": max(16, triton.next_power_of_2(H_q // H_kv))}

    def call() -> None:
        key._attn_decode_split[(num_splits, B * H_kv)](
            q, k, v, o_part, lse_part, scale * 1.4426950408889634, *q.stride(), *k.stride(), *v.stride(),
            H_kv, N, split_size, num_splits, HEAD_DIM=D, BLOCK_N=block_n, num_warps=warps, num_stages=stages,
            **extra,
        )  # fmt: skip
        key._attn_decode_merge[(B * H_q,)](
            o_part, lse_part, o, lse, *o.stride(), H_q, num_splits, HEAD_DIM=D,
            SPLITS_POW2=triton.next_power_of_2(num_splits),
        )  # fmt: skip

    return call, (o, lse)


def host_parts(key: Any, puzzle: str, inputs: dict[str, Any]) -> dict[str, float]:
    """Python's time per call of each step of the key's host function (us): where a call's time goes."""
    q = inputs["q"]
    call, _ = direct(key, puzzle, inputs, 4, 64, 4, 3)
    sizes = [(q.shape[0] * q.shape[1], 8, q.shape[2])] * 2 + [tuple(q.shape)] * 2
    steps: dict[str, Callable[[], Any]] = {
        "get_device_properties": lambda: torch.cuda.get_device_properties(q.device).multi_processor_count,
        "4 x torch.empty": lambda: [torch.empty(size, device=q.device) for size in sizes],
        "both launches": call,
    }
    return {name: host_us(step, 500) for name, step in steps.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--puzzles", default="11,12")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--quick", action="store_true", help="the answer key and SDPA only, no launch shapes")
    args = parser.parse_args(argv)
    found: list[dict[str, Any]] = []
    for puzzle in args.puzzles.split(","):
        spec_puzzle = get_puzzle(puzzle)
        spec = spec_module(spec_puzzle)
        key = load_module(spec_puzzle.solution, f"key_{puzzle}")
        fn = getattr(key, spec_puzzle.name)
        for case in SHAPES[puzzle]:
            gen = torch.Generator(device="cuda")
            gen.manual_seed(zlib.crc32(json.dumps(case).encode()))
            inputs = spec.make_inputs(case, Arena("cuda", gen))
            args_ = list(inputs.values())
            q, k, v, scale = inputs["q"], inputs["k"], inputs["v"], inputs["sm_scale"]
            nbytes = 2 * k.numel() * k.element_size()
            gqa = {"enable_gqa": True} if puzzle == "12" else {}
            rows = {name: ms(call) for name, call in sdpa_backends(q, k, v, scale, **gqa).items()
                    if name in ("sdpa flash", "sdpa cudnn")}  # fmt: skip
            best = min(rows.values())
            call_key = functools.partial(fn, *args_)
            rows["key (python call)"] = ms(call_key)
            rows["key (cuda graph)"] = ms(graphed(call_key))
            host = host_us(call_key)
            parts = ", ".join(f"{name} {us:.1f} us" for name, us in host_parts(key, puzzle, inputs).items())
            print(f"  host time per call of each step: {parts}", flush=True)
            reference = fn(*args_)
            shapes = [] if args.quick else itertools.product(PER_SM, BLOCKS_N, WARPS, STAGES)
            for per_sm, block_n, warps, stages in shapes:
                label = f"direct per_sm={per_sm} BLOCK_N={block_n} warps={warps} stages={stages}"
                try:
                    call, out = direct(key, puzzle, inputs, per_sm, block_n, warps, stages)
                    call()
                    torch.cuda.synchronize()
                    if not torch.allclose(out[0].float(), reference[0].float(), atol=2e-2, rtol=2e-2):
                        rows[label + " (WRONG)"] = float("inf")
                        continue
                    rows[label] = ms(graphed(call))
                except Exception as exc:  # noqa: BLE001 - a launch shape that does not compile is a row
                    print(f"  {label}: {type(exc).__name__}: {str(exc)[:120]}", flush=True)
            print(f"\npuzzle {puzzle} {case}: K+V {nbytes / 1e6:.1f} MB; key's Python time per call {host:.1f} us")
            for name, t in sorted(rows.items(), key=lambda item: item[1]):
                print(f"  {name:<52} {t * 1e3:9.1f} us  {nbytes / t / 1e6:7.0f} GB/s  {best / t:5.2f}x best SDPA")
                found.append({"puzzle": puzzle, "case": case, "name": name, "ms": t, "host_us": host})
            sys.stdout.flush()
    if args.json:
        args.json.write_text(json.dumps(found, indent=1))
    print(f"\n{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
