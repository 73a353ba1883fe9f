"""`python -m bench hopper`: the Hopper track's answer keys (16a, 16b, 16) checked and timed on one Hopper GPU.

    python -m bench hopper --out bench/results/DATE-h100-hopper [--steps 16a 16b 16] [--tutorial PATH]

Each key is first checked against torch on awkward sizes, then timed by CUDA-graph replays (`do_bench_cudagraph`,
the median) beside its baseline on fresh inputs: 16a against torch's device copy, 16b against cuBLAS (torch.matmul),
16 against SDPA's cuDNN backend and, with --tutorial, Triton's tutorial 06 (its `attention(q, k, v, causal,
sm_scale, warp_specialize)`); the attention's software-pipelined variant (solutions/variants/16_software_pipelined.py)
is timed beside the key, so the gain of warp specialisation is measured in the same run. The rows go to
`hopper.json` and the record (record.json) of the folder.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
KEYS = {"16a": "solutions/16a_tma_copy.py", "16b": "solutions/16b_hopper_matmul.py",
        "16": "solutions/16_hopper_attention_fwd.py"}  # fmt: skip
PIPELINED = "solutions/variants/16_software_pipelined.py"
ATTENTION_SIZES = [(D, causal, N) for D in (128, 64) for causal in (False, True) for N in (4096, 8192, 16384)]


def load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem.replace("-", "_"), path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def median_ms(fn: Callable[[], Any]) -> float:
    """CUDA-graph replays of fn, the median in milliseconds (after one call outside the graph: compiling)."""
    import torch
    from triton.testing import do_bench_cudagraph

    fn()
    torch.cuda.synchronize()
    return float(do_bench_cudagraph(fn, rep=200, return_mode="median"))


def copy_rows(key: ModuleType) -> list[dict[str, Any]]:
    import torch

    rows = []
    for M, N in ((1000, 776), (8192, 8192), (16384, 16384)):
        x = torch.randn(M, N, device="cuda", dtype=torch.float16)
        row: dict[str, Any] = {"step": "16a", "case": f"{M}x{N}", "exact": bool(torch.equal(key.tma_copy(x), x))}
        if M >= 8192:
            out = torch.empty_like(x)
            row["key_ms"] = median_ms(lambda: key.tma_copy(x))  # noqa: B023
            row["baseline_ms"] = median_ms(lambda: out.copy_(x))  # noqa: B023
            row["key_GBs"] = 2 * x.numel() * x.element_size() / row["key_ms"] / 1e6
        rows.append(row)
    return rows


def matmul_rows(key: ModuleType) -> list[dict[str, Any]]:
    import torch

    rows = []
    for M, N, K in ((1000, 520, 328), (4096, 4096, 4096), (8192, 8192, 8192)):
        a = torch.randn(M, K, device="cuda", dtype=torch.float16)
        b = torch.randn(K, N, device="cuda", dtype=torch.float16)
        expected = a.float() @ b.float()
        error = ((key.hopper_matmul(a, b).float() - expected).norm() / expected.norm()).item()
        row: dict[str, Any] = {"step": "16b", "case": f"{M}x{N}x{K}", "relative_error": error}
        if M >= 4096:
            row["key_ms"] = median_ms(lambda: key.hopper_matmul(a, b))  # noqa: B023
            row["baseline_ms"] = median_ms(lambda: torch.matmul(a, b))  # noqa: B023
            row["key_TFLOPS"] = 2 * M * N * K / row["key_ms"] / 1e9
        rows.append(row)
    return rows


def attention_rows(key: ModuleType, pipelined: ModuleType, tutorial: ModuleType | None) -> list[dict[str, Any]]:
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    def cudnn(q, k, v, causal, sm_scale):
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=sm_scale)

    kernels = {"key": key.hopper_attention_fwd, "pipelined": pipelined.hopper_attention_fwd}
    rows: list[dict[str, Any]] = []
    for B, H, N, D, causal in ((1, 2, 1, 64, False), (2, 3, 1000, 64, True), (1, 2, 777, 128, False),
                               (1, 2, 300, 128, True)):  # fmt: skip
        q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.float16) for _ in range(3))
        sm_scale = D**-0.5
        scores = (q.float() @ k.float().transpose(-1, -2)) * sm_scale
        if causal:
            scores = scores.masked_fill(torch.ones(N, N, device="cuda", dtype=torch.bool).triu(1), float("-inf"))
        expected_o, expected_lse = torch.softmax(scores, -1) @ v.float(), torch.logsumexp(scores, -1)
        for name, fn in kernels.items():
            o, lse = fn(q, k, v, causal, sm_scale)
            rows.append({"step": "16", "kernel": name, "case": f"B={B} H={H} N={N} D={D} causal={causal}",
                         "o_max_error": (o.float() - expected_o).abs().max().item(),
                         "lse_max_error": (lse - expected_lse).abs().max().item()})  # fmt: skip
    B, H = 4, 32
    for D, causal, N in ATTENTION_SIZES:
        q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.float16) for _ in range(3))
        sm_scale = D**-0.5
        flops = 4 * B * H * N * N * D / (2 if causal else 1)
        inputs = (q, k, v, causal, sm_scale)
        times = {name: median_ms(partial(fn, *inputs)) for name, fn in kernels.items()}
        times["cudnn"] = median_ms(partial(cudnn, *inputs))
        if tutorial is not None:
            times["tutorial06"] = median_ms(partial(tutorial.attention, *inputs, False))
        expected = cudnn(*inputs).float()
        error = (key.hopper_attention_fwd(*inputs)[0].float() - expected).abs().max().item()
        row: dict[str, Any] = {
            "step": "16",
            "case": f"B={B} H={H} N={N} D={D} causal={causal}",
            "key_max_error_vs_cudnn": error,
        }
        row.update({f"{name}_ms": ms for name, ms in times.items()})
        row.update({f"{name}_TFLOPS": flops / ms / 1e9 for name, ms in times.items()})
        rows.append(row)
        del q, k, v, expected
    return rows


def figures(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The timed rows as the record's figures: each kernel's time, with its baseline and the ratio baseline / kernel."""
    found = []
    baselines = {"16a": "torch copy", "16b": "cuBLAS", "16": "cudnn"}
    for row in rows:
        if "baseline_ms" in row:  # 16a, 16b
            found.append({"name": f"{row['step']} key {row['case']}", "metric": "time", "unit": "ms",
                          "value": row["key_ms"], "baseline": baselines[row["step"]],
                          "baseline_value": row["baseline_ms"],
                          "ratio": row["baseline_ms"] / row["key_ms"]})  # fmt: skip
        elif "cudnn_ms" in row:  # 16: each kernel against cuDNN
            for name in ("key", "pipelined", "tutorial06"):
                if f"{name}_ms" in row:
                    found.append({"name": f"16 {name} {row['case']}", "metric": "time", "unit": "ms",
                                  "value": row[f"{name}_ms"], "baseline": "SDPA cuDNN",
                                  "baseline_value": row["cudnn_ms"],
                                  "ratio": row["cudnn_ms"] / row[f"{name}_ms"]})  # fmt: skip
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench hopper", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="the results folder (bench/results/DATE-GPU-hopper)")
    parser.add_argument("--steps", nargs="+", choices=list(KEYS), default=list(KEYS), help="which steps to run")
    parser.add_argument("--tutorial", type=Path, help="Triton's tutorial 06 (06-fused-attention.py), timed beside 16")
    parser.add_argument("--commit", help="the commit of the tree (the device's copy may carry stale git data)")
    args = parser.parse_args(argv)
    import torch

    if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9:
        print("python -m bench hopper needs a Hopper GPU (an H100 or H200): the keys use wgmma and TMA.")
        return 2
    from bench.records import write_record

    started = time.time()
    rows: list[dict[str, Any]] = []
    for step in args.steps:
        key = load(ROOT / KEYS[step])
        if step == "16a":
            rows += copy_rows(key)
        elif step == "16b":
            rows += matmul_rows(key)
        else:
            tutorial = load(args.tutorial) if args.tutorial else None
            rows += attention_rows(key, load(ROOT / PIPELINED), tutorial)
        for row in rows:
            print(json.dumps(row), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "hopper.json").write_text(json.dumps({"rows": rows, "seconds": time.time() - started}, indent=1))
    command = "python -m bench hopper " + " ".join(argv if argv is not None else sys.argv[1:])
    print("record:", write_record(args.out, command, figures(rows), commit=args.commit))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
