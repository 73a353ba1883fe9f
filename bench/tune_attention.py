"""Time the puzzle-9 answer key's forward kernel at fixed configs, bypassing its autotuner.

GPU only: `python3 bench/tune_attention.py` prints, for B=4, H=32, N=16384, fp16 and each head dim
and causal flag, the TFLOPS of each (BLOCK_M, BLOCK_N, num_warps, num_stages), best first, so the
config list in solutions/09_flash_attention_v2_fwd.py can be chosen from measurements.
"""

import importlib.util
import itertools
import math
from pathlib import Path

import torch
import triton.testing

ROOT = Path(__file__).resolve().parent.parent
CANDIDATES = [(128, 64, 8, 3), (128, 64, 8, 2), (128, 64, 4, 3), (128, 128, 8, 3), (128, 128, 8, 2),
              (128, 128, 4, 3), (64, 128, 4, 3), (128, 32, 4, 3), (64, 64, 4, 3), (128, 64, 8, 4)]


def load_key():
    spec = importlib.util.spec_from_file_location("fa2_key", ROOT / "solutions" / "09_flash_attention_v2_fwd.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def time_config(kernel, q, k, v, o, lse, causal: bool, config: tuple[int, int, int, int]) -> float:
    """Median milliseconds of one launch of the forward kernel at one config."""
    bm, bn, warps, stages = config
    B, H, N, D = q.shape
    grid = (triton.cdiv(N, bm), B * H)

    def launch() -> None:
        kernel[grid](
            q, k, v, o, lse, 1 / math.sqrt(D), *q.stride(), *k.stride(), *v.stride(), *o.stride(),
            H, N, HEAD_DIM=D, CAUSAL=causal, BLOCK_M=bm, BLOCK_N=bn, num_warps=warps, num_stages=stages,
        )

    return triton.testing.do_bench(launch, warmup=25, rep=100, return_mode="median")


def main() -> None:
    kernel = load_key()._attn_fwd.fn  # the @triton.jit function under the autotuner
    B, H, N = 4, 32, 16384
    for D, causal in itertools.product((64, 128), (False, True)):
        q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.float16) for _ in range(3))
        o = torch.empty_like(q)
        lse = torch.empty(B, H, N, device="cuda", dtype=torch.float32)
        flops = 4 * B * H * N * N * D * (0.5 if causal else 1.0)
        rows = []
        for config in CANDIDATES:
            try:
                rows.append((flops / time_config(kernel, q, k, v, o, lse, causal, config) / 1e9, config))
            except Exception as exc:  # noqa: BLE001 - a config that does not fit is a result too
                print(f"D={D} causal={causal} {config}: {type(exc).__name__}: {str(exc)[:80]}")
        ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
        error = float((o.float() - ref.float()).abs().max())
        print(f"D={D} causal={causal} (max |o - sdpa| after the last config: {error:.2e})")
        for tflops, config in sorted(rows, reverse=True):
            print(f"    {config}: {tflops:7.1f} TFLOPS")


if __name__ == "__main__":
    main()
