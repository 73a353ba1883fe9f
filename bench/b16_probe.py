"""Why make bench timed key 12 at B = 16, N >= 65536 slower than the tuning runs: the same shape, inputs drawn two ways.

GPU only: `python3 bench/b16_probe.py`. At B = 16, H_kv = 8, G = 4, D = 128 and N in {16384, 65536}, it draws q, k, v
with torch.randn and through the grader's Arena (guarded buffers, as make bench and the grader draw them), and times
under CUDA graph replay (decoding_graphs.graph_us) key 12 as committed and at two other launch shapes, beside SDPA's
cuDNN backend.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import tune_launch as tl_  # noqa: E402
from bench.decoding_graphs import graph_us, load_key, sdpa_call  # noqa: E402
from checks.engine.timing import bench_ms, in_graph  # noqa: E402
from checks.memory import Arena  # noqa: E402
from checks.puzzles import spec_module  # noqa: E402
from checks.registry import get_puzzle  # noqa: E402


def event_ms(fn: Any) -> float:
    """Median ms of fn() between CUDA events, 20 runs, no L2 flush."""
    times = []
    for _ in range(20):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[10]


def main() -> int:
    from torch.nn.attention import SDPBackend

    key = load_key("12")
    spec = spec_module(get_puzzle("12"))
    print(torch.cuda.get_device_name(), flush=True)
    for n in (16384, 65536):
        case = {"B": 16, "H_kv": 8, "G": 4, "N": n, "D": 128}
        gen = torch.Generator(device="cuda").manual_seed(0)
        drawn = {
            "randn": {"q": torch.randn(16, 32, 128, device="cuda", dtype=torch.float16),
                      "k": torch.randn(16, 8, n, 128, device="cuda", dtype=torch.float16),
                      "v": torch.randn(16, 8, n, 128, device="cuda", dtype=torch.float16), "sm_scale": 128**-0.5},
            "arena": spec.make_inputs(case, Arena("cuda", gen)),
        }  # fmt: skip
        for how, inputs in drawn.items():
            args = [inputs["q"], inputs["k"], inputs["v"], inputs["sm_scale"]]
            k = inputs["k"]
            print(f"N={n} {how}: k strides {k.stride()} ptr%4096 {k.data_ptr() % 4096} "
                  f"contiguous {k.is_contiguous()}", flush=True)  # fmt: skip
            sdpa = graph_us(sdpa_call(inputs, SDPBackend.CUDNN_ATTENTION))
            rows = {"key": graph_us(lambda args=args: key.gqa_decoding(*args))}
            for per_sm, block, stages in ((8, 128, 2), (4, 64, 2), (2, 64, 2)):
                call = tl_.with_launch(key, "12", per_sm, block, 4, stages)
                rows[f"{per_sm}/{block}/4/{stages}"] = graph_us(lambda call=call, args=args: call(*args))
            print(f"  sdpa cudnn {sdpa:8.1f} µs; " + "; ".join(f"{k_} {v:8.1f} ({sdpa / v:.2f}x)"
                                                          for k_, v in rows.items()), flush=True)  # fmt: skip
            del inputs, args, k
        if n == 65536:  # the same inputs through make bench's timer: do_bench of in_graph, and of the eager call
            inputs = drawn["arena"]
            args = [inputs["q"], inputs["k"], inputs["v"], inputs["sm_scale"]]
            call = lambda args=args: key.gqa_decoding(*args)
            print(
                f"  make bench's timer: graph {bench_ms(in_graph(call)) * 1e3:8.1f} µs, eager call "
                f"{bench_ms(call) * 1e3:8.1f} µs; decoding_graphs.graph_us {graph_us(call):8.1f} µs",
                flush=True,
            )
            for name, fn in spec.baselines(inputs).items():  # as make bench times them, each in a graph
                try:
                    print(f"  {name}: {bench_ms(in_graph(fn)) * 1e3:8.1f} µs", flush=True)
                except Exception as exc:  # noqa: BLE001 - a baseline that fails is a line
                    print(f"  {name}: {type(exc).__name__}", flush=True)
                print(f"    then key 12 in a graph: {bench_ms(in_graph(call)) * 1e3:8.1f} µs, eager "
                      f"{bench_ms(call) * 1e3:8.1f} µs, in a graph again {bench_ms(in_graph(call)) * 1e3:8.1f} µs",
                      flush=True)  # fmt: skip
                if name == "sdpa math":  # the same after math, once the allocator's cache is given back
                    fn()
                    torch.cuda.synchronize()
                    torch.cuda.empty_cache()
                    print(f"    math again, empty_cache, key 12 in a graph: {bench_ms(in_graph(call)) * 1e3:8.1f} µs",
                          flush=True)  # fmt: skip
                    fn()
                    torch.cuda.synchronize()
                    graph = in_graph(call)
                    print(
                        f"    math again, key 12 captured, then timed with do_bench: {bench_ms(graph) * 1e3:8.1f} µs;"
                        f" graph.replay() with cuda events: {event_ms(graph) * 1e3:8.1f} µs",
                        flush=True,
                    )
        del drawn
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
