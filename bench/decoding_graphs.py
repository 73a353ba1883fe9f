"""Decoding as a server runs it: the answer keys of puzzles 11, 12 and 13 replayed from CUDA graphs, beside SDPA.

GPU only: `python -m bench decoding-graphs --out decoding-graphs.csv [--puzzles 11,12,13] [--quick]`.
For each shape (D = 128, 32 query heads; B in {1, 8}; N in {4096, 16384, 65536, 131072}; puzzle 11 with
32 kv heads, 12 and 13 with 8; 13 in pages of 16 and of 64 keys) it draws fresh random inputs and times:

- the answer key, one call captured in a `torch.cuda.CUDAGraph` and `graph.replay()` timed with
  `triton.testing.do_bench` (median): the GPU's time alone, as serving engines replay decoding steps;
- SDPA held to its flash and to its cuDNN backend (a query of length 1; GQA through `enable_gqa=True`),
  captured and timed the same way; for 13, on contiguous K and V holding the same keys, and puzzle 12's
  answer key on those too (the price of paging);
- the host time per Python call: `time.perf_counter()` around `--calls` calls with one synchronize at
  the end, divided by the number of calls (where the GPU's work is longer, this is the GPU's time).

A backend that does not run a shape, or runs out of memory, is skipped with a note; it never stops the run.
It prints one table and writes every number to the CSV given with --out.
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from bench.decoding_launch import H_Q, KEYS, D, draw, graph_us, host_us, key_call, load_key, one_split, sdpa_call, why

FIELDS = ["puzzle", "B", "H_q", "H_kv", "N", "D", "page_size", "key_us", "sdpa_flash_us", "sdpa_cudnn_us",
          "best_sdpa", "best_sdpa_us", "ratio", "p12_key_us", "one_split_us", "key_host_us", "sdpa_host_us",
          "note"]  # fmt: skip


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench decoding-graphs", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="write the CSV here")
    parser.add_argument("--puzzles", default="11,12,13", help="which answer keys (default 11,12,13)")
    parser.add_argument("--quick", action="store_true", help="only B = 1 and N in {4096, 16384}")
    parser.add_argument("--calls", type=int, default=100, help="Python calls timed for the host time (default 100)")
    args = parser.parse_args(argv)
    args.puzzles = [p.strip() for p in args.puzzles.split(",") if p.strip()]
    unknown = [p for p in args.puzzles if p not in KEYS]
    if unknown:
        parser.error(f"unknown puzzle(s) {', '.join(unknown)}: choose from {', '.join(KEYS)}")
    return args


def shapes(puzzles: list[str], quick: bool) -> list[dict[str, Any]]:
    """Every (puzzle, B, H_kv, N, page_size) to time, in order."""
    batches, lengths = ((1,), (4096, 16384)) if quick else ((1, 8), (4096, 16384, 65536, 131072))
    found = []
    for puzzle in puzzles:
        h_kv = H_Q if puzzle == "11" else 8
        for page_size in (16, 64) if puzzle == "13" else (0,):
            for b in batches:
                for n in lengths:
                    found.append({"puzzle": puzzle, "B": b, "H_q": H_Q, "H_kv": h_kv, "N": n, "D": D,
                                  "page_size": page_size})  # fmt: skip
    return found


def measure(shape: dict[str, Any], keys: dict[str, ModuleType], calls: int) -> dict[str, Any]:
    """One row of the table: every time of one shape; what could not run is named in `note`."""
    import torch
    from torch.nn.attention import SDPBackend

    row: dict[str, Any] = dict(shape)
    notes = []

    def attempt(label: str, fn: Callable[[], float]) -> float | None:
        try:
            return fn()
        except Exception as exc:  # noqa: BLE001 - a backend or size that fails here is skipped, not fatal
            notes.append(f"{label}: {why(exc)}")
            try:
                torch.cuda.synchronize()
            except Exception:  # noqa: BLE001 - the failure is already noted
                pass
            return None

    inputs = draw(shape)
    puzzle = shape["puzzle"]
    key = key_call(keys[puzzle], puzzle, inputs)
    if puzzle == "13":  # the same keys, contiguous, through puzzle 12's key
        twelve = key_call(keys["12"], "12", inputs)
        row["p12_key_us"] = attempt("puzzle 12's key", lambda: graph_us(twelve))
    row["key_us"] = attempt("key", lambda: graph_us(key))
    if puzzle in ("11", "12"):  # the same kernels, one program per head: no split of the keys
        row["one_split_us"] = attempt("one split", lambda: graph_us(one_split(keys[puzzle], key)))
    row["key_host_us"] = attempt("key host", lambda: host_us(key, calls))
    sdpa = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}
    for name, backend in sdpa.items():
        row[f"sdpa_{name}_us"] = attempt(f"sdpa {name}", lambda b=backend: graph_us(sdpa_call(inputs, b)))
    timed = {name: row[f"sdpa_{name}_us"] for name in sdpa if row[f"sdpa_{name}_us"] is not None}
    if timed:
        best = min(timed, key=timed.get)
        row["best_sdpa"], row["best_sdpa_us"] = best, timed[best]
        row["sdpa_host_us"] = attempt("sdpa host", lambda: host_us(sdpa_call(inputs, sdpa[best]), calls))
        if row["key_us"]:
            row["ratio"] = timed[best] / row["key_us"]  # above 1: the key is faster
            check = sdpa_call(inputs, sdpa[best])
            err = attempt("check", lambda: float((key()[0].float() - check().squeeze(2).float()).abs().max()))
            if err is not None and err > 2e-2:
                notes.append(f"key and SDPA differ by {err:.3g}")
    row["note"] = "; ".join(notes)
    return row


def fmt(value: Any, spec: str = ".1f") -> str:
    return "-" if value is None or value == "" else format(value, spec)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("python -m bench decoding-graphs needs a CUDA GPU.", file=sys.stderr)
        return 2
    keys = {p: load_key(p) for p in {*args.puzzles, *(["12"] if "13" in args.puzzles else [])}}
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {__import__('triton').__version__}")
    print(f"{'shape':44} {'key µs':>8} {'best SDPA µs':>18} {'ratio':>6} {'p12 µs':>7} "
          f"{'key host µs':>11} {'SDPA host µs':>12} {'1 split µs':>10}")  # fmt: skip
    rows = []
    for shape in shapes(args.puzzles, args.quick):
        label = (f"{shape['puzzle']}: B={shape['B']} H={shape['H_q']}:{shape['H_kv']} N={shape['N']}"
                 + (f" page={shape['page_size']}" if shape["page_size"] else ""))  # fmt: skip
        try:
            row = measure(shape, keys, args.calls)
        except Exception as exc:  # noqa: BLE001 - drawing the inputs failed (out of memory): the shape is skipped
            row = {**shape, "note": f"skipped, {why(exc)}"}
        torch.cuda.empty_cache()
        rows.append(row)
        sdpa = f"{fmt(row.get('best_sdpa_us'))} ({row.get('best_sdpa', '-')})"
        key, host, sdpa_host = fmt(row.get("key_us")), fmt(row.get("key_host_us")), fmt(row.get("sdpa_host_us"))
        ratio, p12 = fmt(row.get("ratio"), ".2f"), fmt(row.get("p12_key_us"))
        one = fmt(row.get("one_split_us"))
        print(f"{label:44} {key:>8} {sdpa:>18} {ratio:>6} {p12:>7} {host:>11} {sdpa_host:>12} {one:>10}")
        if row.get("note"):
            print(f"    note: {row['note']}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows({k: ("" if r.get(k) is None else r.get(k)) for k in FIELDS} for r in rows)
    print(f"ratio = best SDPA / key (above 1: the key is faster); {len(rows)} rows written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
