"""Lesson 12's cell as a script: loading each tile of K and V once per query head against once per group, timed.

GPU only: `python3 bench/kv_per_query_head.py`. B = 1, 8 kv heads, G = 4, N = 65536, D = 128 (K and V: 268 MB,
more than the L2 cache holds): puzzle 12's key; puzzle 11's key with a query head per program, reading K and V
through views whose head stride is 0 (G times the loads, no copy); and puzzle 11's key on G real copies of K and V.
Each call timed with triton.testing.do_bench_cudagraph (median), as the lesson's cell does.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.decoding_graphs import load_key


def main() -> int:
    import triton.testing

    p11, p12 = load_key("11"), load_key("12")
    print(torch.cuda.get_device_name(), torch.__version__, triton.__version__, flush=True)
    B, H_kv, G, N, D = 1, 8, 4, 65536, 128
    q = torch.randn(B, H_kv * G, D, device="cuda", dtype=torch.float16)
    k, v = (torch.randn(B, H_kv, N, D, device="cuda", dtype=torch.float16) for _ in range(2))
    k_view, v_view = (t.reshape(B * H_kv, 1, N, D).expand(B * H_kv, G, N, D) for t in (k, v))
    k_copy, v_copy = (t.repeat_interleave(G, dim=1) for t in (k, v))
    designs = {
        "puzzle 12's key, a group per program": lambda: p12.gqa_decoding(q, k, v, D**-0.5),
        "puzzle 11's key, a query head per program": (
            lambda: p11.flash_decoding(q.view(B * H_kv, G, D), k_view, v_view, D**-0.5)
        ),
        "puzzle 11's key on G copies of K and V": lambda: p11.flash_decoding(q, k_copy, v_copy, D**-0.5),
    }
    outputs = [call()[0].view(B, H_kv * G, D).float() for call in designs.values()]
    print("the same output:", all(torch.allclose(o, outputs[0], atol=1e-2) for o in outputs))
    torch.cuda.synchronize()
    for _ in range(2):
        for name, call in designs.items():
            print(f"{name:<42} {1e3 * triton.testing.do_bench_cudagraph(call, return_mode='median'):7.1f} µs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
