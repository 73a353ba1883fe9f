"""`python -m bench prefill`: the prefill track's answer keys (14, 15) against the libraries, on one GPU.

    python -m bench prefill --out bench/results/DATE-GPU-prefill [--commit SHA]

14 (varlen_attention) on two sets of packed lengths, uniform (16 sequences of 2048 tokens) and skewed (one of 8192
and 63 of 128), H_q = 32, G = 1 and 4, D = 64 and 128, causal: the key against torch's `varlen_attn` (where this
torch has it and it runs these inputs) and against SDPA over the sequences padded to max_seqlen (the puzzle's
baseline). 15 (chunked_prefill) at the same lengths after a cached context of 4096 tokens per sequence against its
baseline (pages gathered, then SDPA with a bottom-right causal mask), and at a context of 0 against 14's key on the
same new tokens. Each call is timed as the replay of a CUDA graph (`do_bench_cudagraph`, median) where it can be
captured, else by `do_bench`'s median (a host copy or a boolean index cannot be captured), and the row says which.
Useful FLOPs are the puzzle's own count (4·H_q·D·Σ len_q·len_k, halved where causal). The rows go to `prefill.json`
and the folder's record.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.hopper import load, median_ms

ROOT = Path(__file__).resolve().parent.parent
LENGTHS = {"uniform 16x2048": [2048] * 16, "skewed 8192+63x128": [8192] + [128] * 63}
CONTEXT = 4096


def timed(fn: Callable[[], Any], capture: bool = True) -> tuple[float, str]:
    """(median ms, how): CUDA-graph replays where the call can be captured, else do_bench's median. A baseline known
    not to capture (a boolean index, a host copy) passes capture=False: a failed capture keeps its graph's memory
    pool until the process ends, which ran an H100 out of memory a few rows later."""
    import torch
    from triton.testing import do_bench

    if capture:
        try:
            return median_ms(fn), "graph"
        except RuntimeError:
            torch.cuda.synchronize()
    return float(do_bench(fn, warmup=25, rep=200, return_mode="median")), "do_bench"


def timed_or_out_of_memory(fn: Callable[[], Any]) -> tuple[float | None, str]:
    """A baseline that materialises padded or gathered copies, by do_bench's median: at the skewed lengths its copies
    can outgrow the GPU, and then the row says so instead of ending the run."""
    import torch

    try:
        return timed(fn, capture=False)
    except torch.OutOfMemoryError:
        free_memory()
        return None, "out of GPU memory"


def inputs_of(spec: Any, values: dict[str, Any], seed: int) -> dict[str, Any]:
    import torch

    from checks.memory import Arena
    from checks.registry import case_from

    generator = torch.Generator(device="cuda")
    generator.manual_seed(seed)
    return spec.make_inputs(case_from(values, "bench case"), Arena("cuda", generator))


def rows() -> list[dict[str, Any]]:

    from checks.puzzles import p14_varlen_attention as p14
    from checks.puzzles import p15_chunked_prefill as p15

    key14 = load(ROOT / "solutions/14_varlen_attention.py").varlen_attention
    key15 = load(ROOT / "solutions/15_chunked_prefill.py").chunked_prefill
    found: list[dict[str, Any]] = []
    for label, lens in LENGTHS.items():
        for G in (1, 4):
            for D in (64, 128):
                common = {"H_kv": 32 // G, "G": G, "D": D, "seq_lens": lens}
                x = inputs_of(p14, {**common, "causal": True}, seed=len(found))
                args = [x[n] for n in ("q", "k", "v", "cu_seqlens", "max_seqlen", "causal", "sm_scale")]
                flops = p14.work(x).flops
                row: dict[str, Any] = {"step": "14", "lengths": label, "G": G, "D": D, "flops": flops}
                row["key_ms"], row["key_timing"] = timed(lambda args=args: key14(*args))
                row["padded_sdpa_ms"], row["padded_sdpa_timing"] = timed_or_out_of_memory(p14.padded_sdpa(x))
                varlen = p14.torch_varlen(x)
                if varlen is not None:
                    row["varlen_attn_ms"], row["varlen_attn_timing"] = timed(varlen)
                found.append(row)
                print(json.dumps(row), flush=True)
                for context in (CONTEXT, 0):
                    y = inputs_of(p15, {**common, "page_size": 16, "context_lens": [context] * len(lens)},
                                  seed=len(found))  # fmt: skip
                    names = ("q", "k", "v", "k_cache", "v_cache", "block_table", "cu_seqlens", "context_lens",
                             "sm_scale")  # fmt: skip
                    args15 = [y[n] for n in names]
                    row = {"step": "15", "lengths": label, "context": context, "G": G, "D": D,
                           "flops": p15.work(y).flops}  # fmt: skip
                    row["key_ms"], row["key_timing"] = timed(lambda args15=args15: key15(*args15))
                    if context:
                        row["gathered_sdpa_ms"], row["gathered_sdpa_timing"] = timed_or_out_of_memory(
                            p15.gathered_sdpa(y))  # fmt: skip
                    else:  # the same new tokens through 14's key: the cost of the context's loop when it is empty
                        row["key14_ms"], row["key14_timing"] = row_14_time(key14, y)
                    found.append(row)
                    print(json.dumps(row), flush=True)
                    del y, args15
                    free_memory()
                del x, args
                free_memory()
    return found


def free_memory() -> None:
    """Drop what the last configuration left on the GPU (its inputs, the graphs' private pools) before the next."""
    import gc

    import torch

    gc.collect()
    torch.cuda.empty_cache()


def row_14_time(key14: Callable[..., Any], y: dict[str, Any]) -> tuple[float, str]:
    lens = (y["cu_seqlens"][1:] - y["cu_seqlens"][:-1]).tolist()
    args = (y["q"], y["k"], y["v"], y["cu_seqlens"], max(lens), True, y["sm_scale"])
    return timed(lambda: key14(*args))


def figures(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each key's time with each baseline: the ratio is the baseline's time over the key's (above 1: the key is
    faster)."""
    out = []
    for row in found:
        where = f"{row['lengths']} G={row['G']} D={row['D']}" + (
            f" context={row['context']}" if "context" in row else ""
        )
        for base in ("varlen_attn", "padded_sdpa", "gathered_sdpa", "key14"):
            if row.get(f"{base}_ms") is not None:
                out.append({"name": f"{row['step']} key {where}", "metric": f"time vs {base}", "unit": "ms",
                            "value": row["key_ms"], "baseline": base, "baseline_value": row[f"{base}_ms"],
                            "ratio": row[f"{base}_ms"] / row["key_ms"]})  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench prefill", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="the results folder (bench/results/DATE-GPU-prefill)")
    parser.add_argument("--commit", help="the commit of the tree (the device's copy may carry stale git data)")
    args = parser.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("python -m bench prefill needs a CUDA GPU: it times the keys of 14 and 15 against torch's kernels.")
        return 2
    from bench.records import write_record

    started = time.time()
    found = rows()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "prefill.json").write_text(json.dumps({"rows": found, "seconds": time.time() - started}, indent=1))
    command = "python -m bench prefill " + " ".join(argv if argv is not None else sys.argv[1:])
    print("record:", write_record(args.out, command, figures(found), commit=args.commit))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
