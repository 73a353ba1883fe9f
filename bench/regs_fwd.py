"""Registers and spills of 9a's forward kernel at fixed configs, with its time at one large shape (GPU only).

    python3 bench/regs_fwd.py [--tma]

Compiles `_attn_fwd` of solutions/09a_flash_attention_v2_fwd_noncausal.py (the autotuner's own function,
bypassing the autotuner) at each (BLOCK_M, BLOCK_N, num_warps, num_stages) and D, and prints what the
compiled kernel reports (`n_regs` per thread, `n_spills`) beside its TFLOPS at B=4, H=32, N=16384.
With --tma, the same for the tensor-descriptor variant (solutions/variants/09_tensor_descriptors.py, non-causal).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import triton

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from checks.engine.submission import load_module  # noqa: E402

CONFIGS = [(128, 128, 4, 2), (128, 128, 4, 3), (128, 128, 8, 2), (128, 128, 8, 3), (128, 64, 4, 3), (128, 64, 8, 3)]


def main() -> int:
    tma = "--tma" in sys.argv[1:]
    if tma:
        key = load_module(ROOT / "solutions" / "variants" / "09_tensor_descriptors.py", "variant_9_tma")
        triton.set_allocator(key._scratch)
    else:
        key = load_module(ROOT / "solutions" / "09a_flash_attention_v2_fwd_noncausal.py", "key_9a")
    kernel = key._attn_fwd.fn  # the function under @triton.autotune
    B, H, N = 4, 32, 16384
    for d in (64, 128):
        q, k, v = (torch.randn(B, H, N, d, device="cuda", dtype=torch.float16) for _ in range(3))
        o = torch.empty_like(q)
        lse = torch.empty((B, H, N), device="cuda", dtype=torch.float32)
        for bm, bn, warps, stages in CONFIGS:
            grid = (triton.cdiv(N, bm), B * H)

            strides = [t.stride()[:3] if tma else t.stride() for t in (q, k, v, o)]
            args = (q, k, v, o, lse, d**-0.5, *(s for group in strides for s in group), H)
            meta = dict(N_CTX=N, HEAD_DIM=d, BLOCK_M=bm, BLOCK_N=bn, num_warps=warps, num_stages=stages)
            meta |= {"CAUSAL": False} if tma else {}

            def call(grid=grid, args=args, meta=meta):
                return kernel[grid](*args, **meta)

            try:
                compiled = call()
                ms = triton.testing.do_bench(call, warmup=25, rep=100, return_mode="median")
                tflops = 4 * B * H * N * N * d / ms / 1e9
                print(f"D={d} BLOCK_M={bm} BLOCK_N={bn} warps={warps} stages={stages}: n_regs {compiled.n_regs}, "
                      f"n_spills {compiled.n_spills}, {tflops:.0f} TFLOPS", flush=True)  # fmt: skip
            except Exception as exc:  # noqa: BLE001 - a config that does not compile is a line
                print(f"D={d} {bm},{bn},{warps},{stages}: {type(exc).__name__}: {str(exc)[:100]}", flush=True)
    which = "tensor-descriptor variant" if tma else "9a answer key"
    print(f"{which}: {torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
