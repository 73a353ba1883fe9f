"""Puzzle 11's launch shape and kernel form, measured: the vector form (`tl.sum(q[None, :] * k, 1)` over one
query row, below) against the answer key's tensor-core form (the query padded to 16 rows, two `tl.dot`s), each at
several (programs per SM, BLOCK_N, num_warps, num_stages), replayed from CUDA graphs beside SDPA's best backend.

GPU only: `python -m bench tune-flash-decoding [--out PATH.json]`. Prints, per shape, the five fastest rows. Each
row calls the key's own `flash_decoding` through `bench.decoding_launch.at_launch_shape`, the dot form with the key's
split kernel, the vector form with `_split_vector` (below) in its place.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
from pathlib import Path

import torch
import triton
import triton.language as tl

from bench.decoding_launch import H_Q, at_launch_shape, draw, graph_us, load_key, sdpa_call

SHAPES = [{"puzzle": "11", "B": b, "H_kv": H_Q, "N": n, "page_size": 0} for b in (1, 8)
          for n in (4096, 16384, 65536, 131072)]  # fmt: skip
SWEEP = {  # form: (programs per SM, BLOCK_N, num_warps, num_stages) tried
    "vector": list(itertools.product((4, 8), (32, 64, 128), (4, 8), (1, 3))),
    "dot": list(itertools.product((4, 8), (64, 128), (4,), (1, 3))),
}


@triton.jit
def _split_vector(  # the vector form of the key's _attn_decode_split: one query row, tl.sum, float32 tiles
    q_ptr, k_ptr, v_ptr, o_part_ptr, lse_part_ptr, qk_scale,
    stride_qz, stride_qh, stride_qk, stride_kz, stride_kh, stride_kn, stride_kk, stride_vz, stride_vh, stride_vn,
    stride_vk, H, N_CTX, SPLIT_SIZE, NUM_SPLITS, HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr,
):  # fmt: skip
    split = tl.program_id(0)  # which range of SPLIT_SIZE keys
    off_hz = tl.program_id(1)  # which (batch, head)
    off_z = off_hz // H
    off_h = off_hz % H
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(q_ptr + off_z * stride_qz + off_h * stride_qh + offs_d * stride_qk).to(tl.float32)  # (HEAD_DIM,)
    k_base = k_ptr + off_z.to(tl.int64) * stride_kz + off_h.to(tl.int64) * stride_kh
    v_base = v_ptr + off_z.to(tl.int64) * stride_vz + off_h.to(tl.int64) * stride_vh

    m_i = float("-inf")  # running max, base-2 units
    l_i = 0.0  # running sum of exp2(score - m_i)
    acc = tl.zeros((HEAD_DIM,), tl.float32)  # running sum of p * v
    lo = split * SPLIT_SIZE
    hi = tl.minimum(lo + SPLIT_SIZE, N_CTX)
    for start_n in range(lo, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        mask_n = offs_n < hi
        k = tl.load(
            k_base + offs_n[:, None] * stride_kn + offs_d[None, :] * stride_kk, mask=mask_n[:, None], other=0.0
        )  # (BLOCK_N, HEAD_DIM)
        qk = tl.sum(q[None, :] * k.to(tl.float32), 1) * qk_scale  # (BLOCK_N,): one query, no tl.dot
        qk = tl.where(mask_n, qk, float("-inf"))
        # -- puzzle 7's update: a new max rescales what was summed so far
        m_ij = tl.maximum(m_i, tl.max(qk, 0))
        p = tl.math.exp2(qk - m_ij)
        alpha = tl.math.exp2(m_i - m_ij)
        v = tl.load(
            v_base + offs_n[:, None] * stride_vn + offs_d[None, :] * stride_vk, mask=mask_n[:, None], other=0.0
        )  # (BLOCK_N, HEAD_DIM)
        acc = acc * alpha + tl.sum(p[:, None] * v.to(tl.float32), 0)
        l_i = l_i * alpha + tl.sum(p, 0)
        m_i = m_ij
    # this split's partial result: its own softmax-weighted average of V, and its logsumexp (base 2)
    part = off_hz * NUM_SPLITS + split
    tl.store(o_part_ptr + part * HEAD_DIM + offs_d, acc / l_i)
    tl.store(lse_part_ptr + part, m_i + tl.math.log2(l_i))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench tune-flash-decoding", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    from torch.nn.attention import SDPBackend

    key = load_key("11")
    found = []
    for shape in SHAPES:
        inputs = draw(shape)
        sdpa = min(graph_us(sdpa_call(inputs, b)) for b in (SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION))
        reference = sdpa_call(inputs, SDPBackend.FLASH_ATTENTION)().squeeze(2).float()
        args_ = [inputs[name] for name in ("q", "k", "v", "sm_scale")]
        rows = {"key as written": graph_us(lambda a=args_: key.flash_decoding(*a))}
        tried = [(form, *shape) for form, shapes in SWEEP.items() for shape in shapes]
        for form, per_sm, block_n, warps, stages in tried:
            label = f"{form} per_sm={per_sm} BLOCK_N={block_n} warps={warps} stages={stages}"
            try:
                split_kernel = None if form == "dot" else _split_vector
                at_shape = at_launch_shape(key, "11", per_sm, block_n, warps, stages, split_kernel=split_kernel)
                call = functools.partial(at_shape, *args_)
                out, _ = call()
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
        shown = best[:4] + [next(r for r in best if r[0].startswith(form)) for form in SWEEP if any(
            r[0].startswith(form) for r in best)]  # fmt: skip
        for name, us in dict(shown).items():
            print(f"  {name:<52} {us:8.1f} us  {sdpa / us:5.2f}x best SDPA", flush=True)
        found.append({"shape": shape, "sdpa_us": sdpa, "rows": rows})
        if args.out:
            args.out.write_text(json.dumps(found, indent=1))
        torch.cuda.empty_cache()
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
