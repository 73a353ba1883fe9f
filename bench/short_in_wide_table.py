"""Lesson 13's short sequence in a wide block table, timed: what sizing the splits by the table's width costs.

GPU only: `python -m bench short-in-wide-table`. One sequence (B = 1) of `--lengths` keys (default 1000 and
4000), 32 query heads on 8 kv heads, D = 128, pages of 16 in scattered order, read by puzzle 13's answer key
through a block table of 2^17 keys (its row padded with pages no sequence uses) and through a table just wide
enough for the sequence; the same keys stored contiguously read by puzzle 12's answer key beside them. Each call
captured in a CUDA graph and its replay timed with `triton.testing.do_bench` (median, µs), as
`python -m bench decoding-graphs` does; the two paged calls are checked to give the same output.
"""

from __future__ import annotations

import argparse
import math
from functools import partial
from types import ModuleType

import torch

from bench.decoding_launch import graph_us, load_key

H_Q, H_KV, D, PAGE = 32, 8, 128, 16


def time_one(n: int, wide_keys: int, p12: ModuleType, p13: ModuleType) -> None:
    """One sequence of n keys: key 13 through the wide table and the narrow one, key 12 on contiguous keys."""
    cuda = {"device": "cuda", "dtype": torch.float16}
    wide_pages, pages, scale = wide_keys // PAGE, math.ceil(n / PAGE), 1.0 / math.sqrt(D)
    order = torch.randperm(wide_pages, device="cuda").to(torch.int32)  # every page of the cache, scattered
    q = torch.randn(1, H_Q, D, **cuda)
    k_cache, v_cache = (torch.randn(wide_pages, PAGE, H_KV, D, **cuda) for _ in range(2))
    wide = order.view(1, wide_pages)  # the sequence's pages first, then pages it does not use
    narrow = wide[:, :pages].contiguous()
    seq_lens = torch.full((1,), n, dtype=torch.int32, device="cuda")
    k, v = (c[narrow[0].long()].reshape(1, pages * PAGE, H_KV, D)[:, :n].transpose(1, 2).contiguous()
            for c in (k_cache, v_cache))  # fmt: skip
    calls = {
        f"13, table of {wide_keys} keys": partial(p13.paged_decoding, q, k_cache, v_cache, wide, seq_lens, scale),
        f"13, table of {pages * PAGE} keys": partial(p13.paged_decoding, q, k_cache, v_cache, narrow, seq_lens, scale),
        "12, contiguous": partial(p12.gqa_decoding, q, k, v, scale),
    }
    outs = [call()[0].float() for call in calls.values()]
    print(f"N = {n}: the same output: {all(torch.allclose(o, outs[0], atol=1e-2) for o in outs)}", flush=True)
    for name, call in calls.items():
        print(f"  {name:<28} {graph_us(call):8.1f} µs", flush=True)


def main(argv: list[str] | None = None) -> int:
    import triton

    parser = argparse.ArgumentParser(prog="python -m bench short-in-wide-table", description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", default="1000,4000", help="the sequence's keys, comma-separated")
    parser.add_argument("--wide", type=int, default=2**17, help="keys a row of the wide table can list")
    args = parser.parse_args(argv)
    p12, p13 = load_key("12"), load_key("13")
    print(torch.cuda.get_device_name(), torch.__version__, triton.__version__, flush=True)
    for n in (int(x) for x in args.lengths.split(",")):
        time_one(n, args.wide, p12, p13)
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
