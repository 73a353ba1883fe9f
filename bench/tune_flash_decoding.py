"""Puzzle 11's launch shape and kernel form, measured: the vector form (the key's `tl.sum` over one query row)
against the tensor-core form (puzzle 12's kernel with a group of one query padded to 16 rows), each at several
(programs per SM, BLOCK_N, num_warps, num_stages), replayed from CUDA graphs beside SDPA's best backend.

GPU only: `python3 bench/tune_flash_decoding.py [--out PATH.json]`. Prints, per shape, the five fastest rows.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path
from typing import Any

import torch
import triton

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.decoding_graphs import H_Q, D, draw, graph_us, load_key, sdpa_call  # noqa: E402

SHAPES = [{"puzzle": "11", "B": b, "H_kv": H_Q, "N": n, "page_size": 0} for b in (1, 8)
          for n in (4096, 16384, 65536, 131072)]  # fmt: skip
PER_SM = (2, 4, 8)
BLOCKS_N = (32, 64, 128)
WARPS = (4, 8)
STAGES = (1, 3)


def launch(kernels: Any, form: str, inputs: dict[str, Any], per_sm: int, block_n: int, warps: int, stages: int):
    q, k, v, scale = inputs["q"], inputs["k"], inputs["v"], inputs["sm_scale"]
    B, H, N, _ = k.shape
    sms = torch.cuda.get_device_properties(q.device).multi_processor_count
    n_blocks = triton.cdiv(N, block_n)
    splits = max(1, min(triton.cdiv(n_blocks, 4), triton.cdiv(per_sm * sms, B * H)))
    split_size = triton.cdiv(n_blocks, splits) * block_n
    num_splits = triton.cdiv(N, split_size)
    o_part = torch.empty((B * H, num_splits, D), dtype=torch.float32, device=q.device)
    lse_part = torch.empty((B * H, num_splits), dtype=torch.float32, device=q.device)
    o = torch.empty((B, H, D), dtype=q.dtype, device=q.device)
    lse = torch.empty((B, H), dtype=torch.float32, device=q.device)
    extra = {"GROUP": 1, "BLOCK_G": 16} if form == "dot" else {}

    def call() -> None:
        kernels._attn_decode_split[(num_splits, B * H)](
            q, k, v, o_part, lse_part, scale * 1.4426950408889634, *q.stride(), *k.stride(), *v.stride(),
            H, N, split_size, num_splits, HEAD_DIM=D, BLOCK_N=block_n, num_warps=warps, num_stages=stages, **extra,
        )  # fmt: skip
        kernels._attn_decode_merge[(B * H,)](
            o_part, lse_part, o, lse, *o.stride(), H, num_splits, HEAD_DIM=D,
            SPLITS_POW2=triton.next_power_of_2(num_splits),
        )  # fmt: skip

    return call, o


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    from torch.nn.attention import SDPBackend

    forms = {"vector": load_key("11"), "dot": load_key("12")}
    found = []
    for shape in SHAPES:
        inputs = draw(shape)
        sdpa = min(graph_us(sdpa_call(inputs, b)) for b in (SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION))
        reference = sdpa_call(inputs, SDPBackend.FLASH_ATTENTION)().squeeze(2).float()
        args_ = [inputs[name] for name in ("q", "k", "v", "sm_scale")]
        rows = {"key as written": graph_us(lambda a=args_: forms["vector"].flash_decoding(*a))}
        for form, per_sm, block_n, warps, stages in itertools.product(forms, PER_SM, BLOCKS_N, WARPS, STAGES):
            label = f"{form} per_sm={per_sm} BLOCK_N={block_n} warps={warps} stages={stages}"
            try:
                call, out = launch(forms[form], form, inputs, per_sm, block_n, warps, stages)
                call()
                torch.cuda.synchronize()
                if (out.float() - reference).abs().max() > 2e-2:
                    print(f"  {label}: WRONG", flush=True)
                    continue
                rows[label] = graph_us(call)
            except Exception as exc:  # noqa: BLE001 - a shape that does not compile is a line, not the end
                print(f"  {label}: {type(exc).__name__}: {str(exc)[:100]}", flush=True)
        best = sorted(rows.items(), key=lambda item: item[1])
        print(f"B={shape['B']} N={shape['N']}: best SDPA {sdpa:.1f} us; key as written {rows['key as written']:.1f} us"
              f" ({sdpa / rows['key as written']:.2f}x)")  # fmt: skip
        for name, us in best[:6]:
            print(f"  {name:<52} {us:8.1f} us  {sdpa / us:5.2f}x best SDPA", flush=True)
        found.append({"shape": shape, "sdpa_us": sdpa, "rows": rows})
        torch.cuda.empty_cache()
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}")
    if args.out:
        args.out.write_text(json.dumps(found, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
