"""Where a decoding key's Python call spends its time, and what one launch would save.

GPU only: `python3 bench/host_time.py --out host-time.json`. Two parts, fresh random inputs, D = 128, 32 query heads:

1. Host µs per call of each step of a key's call (a Triton launch, `torch.empty`, `torch.zeros`, reading the SM
   count), of the keys 11, 12 and 13 whole and without their launches, of SDPA, and of puzzle 12's key in one
   launch (bench/candidates/12_one_launch.py, counters made zero by each call or kept between calls), at B = 1,
   N = 4096, where the GPU's work is shorter than the host's: the least of ten loops of 200 calls queued without
   waiting for the GPU.
2. Kernel µs under CUDA graph replay (`decoding_graphs.graph_us`) of the key and the one-launch form, at puzzle
   11's and 12's shapes of `decoding_graphs`, beside SDPA's best backend.

`--compare FOLDER` (keys of an earlier commit) and `--floor` instead time, in alternating rounds, each key against
those keys, against the one-launch floor (two `torch.empty` and one Triton launch of as many arguments as a key's,
nothing else: the least any key in one launch that returns new tensors can cost) and against SDPA. `--profile`
adds key 12's call taken apart in alternating rounds (its two launches with their arguments ready, each launch, its
four allocations, the rest of its Python) beside the floor and SDPA, and `cProfile` of each key's call.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import decoding_graphs as dg  # noqa: E402
from checks.engine.submission import load_module  # noqa: E402

ONE_LAUNCH = load_module(ROOT / "bench" / "candidates" / "12_one_launch.py", "one_launch_12")
ONE_LAUNCH_MODES = {  # the candidate's forms: counters made zero in each call, kept; partials kept too
    "zeros": {"counters": "zeros"},
    "kept": {"counters": "kept"},
    "all_kept": {"counters": "kept", "partials": "kept"},
}


def host_us(fn: Callable[[], Any], calls: int = 200, loops: int = 10) -> float:
    """Python's µs per call, the launches queued and not waited for: the least of `loops` loops."""
    import torch

    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(loops):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, time.perf_counter() - start)
        torch.cuda.synchronize()
    return 1e6 * best / calls


def short_step(puzzle: str) -> dict[str, Any]:
    """Fresh inputs of `puzzle` at B = 1, N = 4096, where the GPU's work is shorter than the host's."""
    h_kv, page_size = dg.H_Q if puzzle == "11" else 8, 16 if puzzle == "13" else 0
    return dg.draw({"puzzle": puzzle, "B": 1, "H_kv": h_kv, "N": 4096, "page_size": page_size})


class NoLaunch:
    """A kernel whose launches do nothing: what the rest of the call costs."""

    def __getitem__(self, grid: Any) -> Callable[..., None]:
        return lambda *args, **kwargs: None


def without_launches(module: ModuleType, call: Callable[[], Any]) -> Callable[[], Any]:
    names = [n for n in ("_attn_decode_split", "_attn_decode_merge") if hasattr(module, n)]
    saved = {n: getattr(module, n) for n in names}

    def run() -> Any:
        for n in names:
            setattr(module, n, NoLaunch())
        try:
            return call()
        finally:
            for n, kernel in saved.items():
                setattr(module, n, kernel)

    return run


def part_host(keys: dict[str, ModuleType]) -> list[dict[str, Any]]:
    """Host µs per call of each step of a key's call, of each key whole and without its launches, of SDPA and of
    the one-launch candidate, at B = 1, N = 4096 (the GPU's work is short)."""
    import torch
    import triton
    import triton.language as tl
    from torch.nn.attention import SDPBackend, sdpa_kernel

    @triton.jit
    def few(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

    many = _launch_of_23()
    x = torch.randn(1024, device="cuda")
    y = torch.empty_like(x)
    props: dict[Any, int] = {}
    steps: dict[str, Callable[[], Any]] = {
        "a Triton launch, 3 arguments": lambda: few[(1,)](x, y, 1000, BLOCK=1024),
        "a Triton launch, 23 arguments and 4 constexprs": lambda: many[(1,)](
            x, y, *range(3, 23), 1000, A=1, B=2, C=3, BLOCK=1024
        ),
        "the same with num_stages=2": lambda: many[(1,)](
            x, y, *range(3, 23), 1000, A=1, B=2, C=3, BLOCK=1024, num_stages=2
        ),  # fmt: skip
        "torch.empty (4096 floats)": lambda: torch.empty((32, 128), dtype=torch.float32, device=x.device),
        "torch.zeros (8 ints)": lambda: torch.zeros((8,), dtype=torch.int32, device=x.device),
        "torch.cuda.get_device_properties(...).multi_processor_count": lambda: (
            torch.cuda.get_device_properties(x.device).multi_processor_count
        ),
        "the SM count from a dict": lambda: props.get(x.device) or props.setdefault(x.device, 132),
    }
    rows = [{"what": name, "host_us": host_us(step)} for name, step in steps.items()]
    for puzzle, key in keys.items():
        inputs = short_step(puzzle)
        args, call = dg.key_args(puzzle, inputs), dg.key_call(key, puzzle, inputs)
        rows.append({"what": f"key {puzzle}", "host_us": host_us(call)})
        rows.append({"what": f"key {puzzle} without its two launches", "host_us": host_us(without_launches(key, call))})
        if puzzle in ("11", "12"):
            for mode, options in ONE_LAUNCH_MODES.items():
                one = functools.partial(ONE_LAUNCH.gqa_decoding, *args, **options)
                rows.append({"what": f"one launch, {mode.replace('_', ' ')}, as {puzzle}", "host_us": host_us(one)})
        q, k, v = inputs["q"].unsqueeze(2), inputs["k"], inputs["v"]
        gqa = q.shape[1] != k.shape[1]
        for backend, label in ((SDPBackend.CUDNN_ATTENTION, "cudnn"), (SDPBackend.FLASH_ATTENTION, "flash")):
            sdpa = lambda q=q, k=k, v=v, gqa=gqa: torch.nn.functional.scaled_dot_product_attention(
                q, k, v, enable_gqa=gqa)  # fmt: skip
            try:
                with sdpa_kernel(backend):
                    rows.append({"what": f"SDPA {label} as {puzzle}", "host_us": host_us(sdpa)})
                rows.append({"what": f"SDPA {label} as {puzzle}, sdpa_kernel entered in each call",
                             "host_us": host_us(dg.sdpa_call(inputs, backend))})  # fmt: skip
            except RuntimeError as exc:
                rows.append({"what": f"SDPA {label} as {puzzle}", "note": dg.why(exc)})
    for row in rows:
        print(f"  {row['what']:<62} {row.get('host_us', float('nan')):7.1f} µs  {row.get('note', '')}", flush=True)
    return rows


def part_kernels(keys: dict[str, ModuleType], quick: bool) -> list[dict[str, Any]]:
    import torch
    from torch.nn.attention import SDPBackend

    rows = []
    for shape in dg.shapes([p for p in ("11", "12") if p in keys], quick):
        inputs = dg.draw(shape)
        args, call = dg.key_args(shape["puzzle"], inputs), dg.key_call(keys[shape["puzzle"]], shape["puzzle"], inputs)
        row: dict[str, Any] = {k: shape[k] for k in ("puzzle", "B", "H_kv", "N")}
        row["key_us"] = dg.graph_us(call)
        ref = call()
        for mode, options in ONE_LAUNCH_MODES.items():
            one = functools.partial(ONE_LAUNCH.gqa_decoding, *args, **options)
            row[f"one_{mode}_us"] = dg.graph_us(one)
            got = one()
            row[f"one_{mode}_err"] = float((got[0].float() - ref[0].float()).abs().max())
        for name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
            try:
                row[f"sdpa_{name}_us"] = dg.graph_us(dg.sdpa_call(inputs, backend))
            except RuntimeError as exc:
                row[f"sdpa_{name}_note"] = dg.why(exc)
        best = min(row.get("sdpa_flash_us", float("inf")), row.get("sdpa_cudnn_us", float("inf")))
        row["best_sdpa_us"] = best
        zeros = row["one_zeros_us"]
        print(f"  {shape['puzzle']}: B={shape['B']} H_kv={shape['H_kv']} N={shape['N']:<7} key {row['key_us']:7.1f}"
              f" ({best / row['key_us']:.2f}x)  one/zeros {zeros:7.1f} ({best / zeros:.2f}x)"
              f"  one/kept {row['one_kept_us']:7.1f} ({best / row['one_kept_us']:.2f}x)"
              f"  one/all kept {row['one_all_kept_us']:7.1f} ({best / row['one_all_kept_us']:.2f}x)"
              f"  best SDPA {best:7.1f}"
              f"  err {row['one_kept_err']:.1e}", flush=True)  # fmt: skip
        rows.append(row)
        del inputs
        torch.cuda.empty_cache()
    return rows


def alternate(sides: dict[str, Callable[[], Any]], rounds: int = 30) -> dict[str, list[float]]:
    """µs per call of each side in `rounds` alternating rounds of 100 queued calls (the host's speed drifts:
    alternating gives each side the same drift)."""
    import torch

    for fn in sides.values():
        for _ in range(3):
            fn()
    torch.cuda.synchronize()
    times: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(rounds):
        for name, fn in sides.items():
            start = time.perf_counter()
            for _ in range(100):
                fn()
            times[name].append(1e4 * (time.perf_counter() - start))
            torch.cuda.synchronize()
    return times


def least_and_median(puzzle: str, times: dict[str, list[float]]) -> list[dict[str, Any]]:
    import statistics

    rows = []
    for name, found in times.items():
        row = {"puzzle": puzzle, "what": name, "least_us": min(found), "median_us": statistics.median(found)}
        rows.append(row)
        print(f"  {puzzle} {name:<44} least {row['least_us']:6.1f} µs  median {row['median_us']:6.1f} µs", flush=True)
    return rows


def key_12_parts(key: ModuleType, inputs: dict[str, Any]) -> dict[str, Callable[[], Any]]:
    """Key 12's call and each of its parts alone: its two launches with their arguments ready, each launch, its
    four allocations, the rest of its Python; beside them the one-launch floor and SDPA."""
    import torch

    q, k, v, sm_scale = inputs["q"], inputs["k"], inputs["v"], inputs["sm_scale"]
    B, H_kv, N, D = k.shape
    H_q = q.shape[1]
    block_n, split_size, num_stages = key.launch_shape(N, B * H_kv, q.device)
    splits = key.cdiv(N, split_size)
    shapes = [((B * H_q, splits, D), torch.float32), ((B * H_q, splits), torch.float32), ((B, H_q, D), q.dtype),
              ((B, H_q), torch.float32)]  # fmt: skip
    o_part, lse_part, o, lse = (torch.empty(shape, dtype=dtype, device=q.device) for shape, dtype in shapes)
    split_args = (q, k, v, o_part, lse_part, sm_scale * 1.4426950408889634, *q.stride(), *k.stride(), *v.stride(),
                  H_kv, N, split_size, splits)  # fmt: skip
    split_options = {"GROUP": H_q // H_kv, "BLOCK_G": max(16, key.next_power_of_2(H_q // H_kv)), "HEAD_DIM": D,
                     "BLOCK_N": block_n, "num_stages": num_stages}  # fmt: skip
    merge_args = (o_part, lse_part, o, lse, *o.stride(), H_q, splits)
    merge_options = {"HEAD_DIM": D, "SPLITS_POW2": key.next_power_of_2(splits)}

    def split_launch() -> None:
        key._attn_decode_split[(splits, B * H_kv)](*split_args, **split_options)

    def merge_launch() -> None:
        key._attn_decode_merge[(B * H_q,)](*merge_args, **merge_options)

    def both_launches() -> None:
        split_launch()
        merge_launch()

    def python_between() -> Any:  # the key's statements other than its launches and allocations
        b, h_kv, n, d = k.shape
        h_q = q.shape[1]
        block, size, stages = key.launch_shape(n, b * h_kv, q.device)
        count = key.cdiv(n, size)
        strides = (*q.stride(), *k.stride(), *v.stride())
        return max(16, key.next_power_of_2(h_q // h_kv)), key.next_power_of_2(count), strides, stages, block, d

    call = dg.key_call(key, "12", inputs)
    return {
        "key 12": call,
        "key 12 without its launches": without_launches(key, call),
        "its two launches, arguments ready": both_launches,
        "its split launch alone": split_launch,
        "its merge launch alone": merge_launch,
        "its four torch.empty": lambda: [torch.empty(shape, dtype=dtype, device=q.device) for shape, dtype in shapes],
        "its Python apart from launches and allocations": python_between,
        "floor: two torch.empty and one launch": one_launch_floor(inputs),
        "SDPA (flash)": functools.partial(
            torch.nn.functional.scaled_dot_product_attention, q.unsqueeze(2), k, v, enable_gqa=True
        ),  # fmt: skip
    }


def part_profile(keys: dict[str, ModuleType]) -> list[dict[str, Any]]:
    """Key 12's call and each of its parts alone, in alternating rounds; then cProfile's top functions over 200
    calls of each key."""
    import cProfile
    import io
    import pstats

    import torch

    rows = least_and_median("12", alternate(key_12_parts(keys["12"], short_step("12"))))
    for puzzle in ("11", "12", "13"):
        fn = dg.key_call(keys[puzzle], puzzle, short_step(puzzle))
        for _ in range(5):
            fn()
        torch.cuda.synchronize()
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(200):
            fn()
        profile.disable()
        torch.cuda.synchronize()
        text = io.StringIO()
        pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(22)
        print(f"--- cProfile, key {puzzle}, 200 calls", text.getvalue(), sep="\n", flush=True)
        rows.append({"what": f"cProfile key {puzzle}", "text": text.getvalue()})
    return rows


@functools.cache
def _launch_of_23() -> Any:
    """A kernel of 23 arguments and 4 constexprs, as many as a decoding key's split launch, that copies a few
    floats: what a Triton launch costs the host apart from what the kernel does."""
    import triton
    import triton.language as tl

    @triton.jit
    def many(x_ptr, y_ptr, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19,
             a20, n, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr, BLOCK: tl.constexpr):  # fmt: skip
        offs = tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

    return many


def one_launch_floor(inputs: dict[str, Any]) -> Callable[[], Any]:
    """The least a key in one launch that returns new tensors can cost the host: the two outputs' torch.empty
    and one launch of as many arguments as the key's (its kernel copies 32 floats), nothing else."""
    import torch

    q = inputs["q"]
    B, H_q, D = q.shape
    many = _launch_of_23()
    scratch = torch.randn(32, device=q.device)

    def call() -> Any:
        o = torch.empty((B, H_q, D), dtype=q.dtype, device=q.device)
        lse = torch.empty((B, H_q), dtype=torch.float32, device=q.device)
        many[(1,)](scratch, lse, *range(3, 23), 32, A=1, B=2, C=3, BLOCK=32)
        return o, lse

    return call


def part_compare(keys: dict[str, ModuleType], before: dict[str, ModuleType] | None) -> list[dict[str, Any]]:
    """Host µs per call of each key (and of the keys in `before`, if given), of the one-launch floor and of SDPA,
    in alternating rounds; the least and the median round."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    rows = []
    for puzzle in ("11", "12", "13"):
        inputs = short_step(puzzle)
        q, k, v = inputs["q"].unsqueeze(2), inputs["k"], inputs["v"]
        gqa = q.shape[1] != k.shape[1]
        sides: dict[str, Callable[[], Any]] = {}
        if before is not None:
            sides["before"] = dg.key_call(before[puzzle], puzzle, inputs)
        sides["key"] = dg.key_call(keys[puzzle], puzzle, inputs)
        if puzzle == "12":  # the one-launch candidate, its counters kept, its partials made in each call or kept
            args = dg.key_args(puzzle, inputs)
            sides["one launch, kept counters"] = functools.partial(ONE_LAUNCH.gqa_decoding, *args, counters="kept")
            sides["one launch, all kept"] = functools.partial(
                ONE_LAUNCH.gqa_decoding, *args, counters="kept", partials="kept"
            )
        sides["floor"] = one_launch_floor(inputs)
        sides["sdpa"] = functools.partial(torch.nn.functional.scaled_dot_product_attention, q, k, v, enable_gqa=gqa)
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            rows += least_and_median(puzzle, alternate(sides))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/host_time.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="write every row here (JSON)")
    parser.add_argument("--quick", action="store_true", help="kernel part at B = 1, N in {4096, 16384} only")
    parser.add_argument("--no-kernels", action="store_true", help="the host part only")
    parser.add_argument("--keys", type=Path, help="load the keys 11-13 from this folder instead of solutions/")
    parser.add_argument("--compare", type=Path, help="time the keys in this folder against --keys, alternating")
    parser.add_argument(
        "--floor", action="store_true", help="time the keys against the one-launch floor and SDPA, alternating"
    )
    parser.add_argument("--profile", action="store_true", help="also time key 12's parts and cProfile each key")
    args = parser.parse_args(argv)
    import torch
    import triton

    if not torch.cuda.is_available():
        print("bench/host_time.py needs a CUDA GPU.", file=sys.stderr)
        return 2
    folder = args.keys or ROOT / "solutions"
    keys = {p: load_module(folder / name, f"key_{p}") for p, name in dg.KEYS.items()}
    meta = {"keys": str(folder), "gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
            "triton": triton.__version__,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}  # fmt: skip
    print(meta, flush=True)
    if args.compare or args.floor:
        before = None
        if args.compare:
            before = {p: load_module(args.compare / name, f"before_{p}") for p, name in dg.KEYS.items()}
        result: dict[str, Any] = {"meta": meta, "compare": part_compare(keys, before)}
        args.out.write_text(json.dumps(result, indent=1))
        return 0
    result = {"meta": meta, "host": part_host(keys)}
    if args.profile:
        result["profile"] = part_profile(keys)
    if not args.no_kernels:
        result["kernels"] = part_kernels(keys, args.quick)
    args.out.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
