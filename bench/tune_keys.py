"""Time the answer keys of puzzles 4, 9 and 10 (and their tensor-descriptor variants) at fixed configs.

GPU only: `python -m bench tune-keys [--parts mm,fwd,bwd] [--jobs 14] [--json PATH] [--n 16384]
[--tutorial PATH]`. For each part it
compiles every (case, config) first, in parallel processes (Triton's disk cache keeps the binaries), then
times them one after the other in this process with `triton.testing.do_bench` (median), beside the
baselines of the same run: torch.matmul (cuBLAS), and SDPA held to its flash and cuDNN backends (and, with
`--tutorial`, Triton's fused-attention tutorial loaded from that file, with warp specialisation off and on). It prints,
per case, each config's rate and its ratio to the baselines, best first, so that the config lists of the
answer keys can be chosen from measurements (bench/tuning.md records the runs).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import multiprocessing
import sys
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import torch
import triton

from checks.engine.submission import load_module
from checks.engine.timing import bench_ms
from checks.instructor import tutorial as tut06
from checks.puzzles import p09_flash_attention_v2_fwd as p09
from checks.puzzles import p10_flash_attention_v2_bwd as p10

ROOT = Path(__file__).resolve().parent.parent

REP_MS = 200  # do_bench's repetitions, in ms: more than the grader's, for configs a few percent apart
MM_SIZES = (4096, 8192)
ATTN = dict(B=4, H=32, N=16384)
SMALL = dict(B=1, H=32, N=1024)  # compiles to the same binaries: every size is a multiple of 16
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"  # cpu: --dry, in the interpreter
MM_KEY = [
    (128, 256, 64, 8, 8, 3),
    (256, 128, 64, 8, 8, 3),
    (128, 256, 64, 8, 8, 4),
    (256, 128, 64, 8, 8, 4),
    (128, 128, 64, 8, 8, 4),
    (128, 128, 64, 8, 4, 4),
    (128, 128, 64, 8, 8, 5),
    (128, 256, 32, 8, 8, 4),
    (128, 256, 64, 16, 8, 3),
    (128, 128, 128, 8, 8, 3),
    (128, 256, 64, 4, 8, 3),
    (64, 256, 64, 8, 4, 4),
]
MM_TMA = [
    (128, 256, 64, 8, 8, 3),
    (128, 256, 64, 8, 8, 4),
    (256, 128, 64, 8, 8, 3),
    (128, 128, 64, 8, 8, 4),
    (128, 128, 64, 8, 4, 4),
    (128, 128, 128, 8, 8, 3),
    (128, 256, 64, 16, 8, 3),
]
# the fastest of the tutorial's own forward config space in the run of 16:08 UTC (bench/tuning.md), and 256-row tiles
FWD_KEY = [(128, 64, 8, 3), (128, 64, 8, 4), (128, 128, 8, 3), (64, 64, 4, 3), (256, 64, 8, 3)]
FWD_TMA_WS = [(128, 64, 4, 2, True), (128, 128, 4, 2, True), (128, 128, 8, 3, True), (128, 64, 8, 3, True)]
# a candidate forward (--candidate DIR): the key's configs and the tutorial's 4-warp ones
FWD_CANDIDATE = FWD_KEY + [(128, 128, 4, 2), (128, 128, 4, 3), (128, 64, 4, 2), (128, 64, 4, 3), (64, 64, 4, 4)]
# warp_specialize=True (the last field) aborted Triton 3.6's compiler on an H100 (an MLIR dominance assertion)
FWD_TMA = [
    (128, 64, 8, 3, False),
    (128, 64, 8, 4, False),
    (128, 128, 8, 3, False),
    (128, 64, 4, 3, False),
    (256, 64, 8, 3, False),
    (128, 128, 8, 4, False),
    (128, 64, 8, 2, False),
    (128, 128, 4, 2, False),
    (128, 128, 4, 3, False),
    (128, 64, 4, 2, False),
]
DKDV = [
    (32, 128, 8, 3),
    (32, 128, 4, 5),
    (32, 128, 8, 5),
    (32, 128, 8, 4),
    (32, 128, 4, 3),
    (32, 128, 4, 4),
    (64, 128, 8, 3),
    (64, 128, 8, 4),
    (32, 64, 4, 3),
    (64, 64, 4, 3),
    (32, 256, 8, 3),
    (64, 128, 4, 3),
]
ATOMIC = [
    (32, 128, 8, 3, False),
    (32, 128, 8, 3, True),
    (64, 128, 8, 3, True),
    (32, 128, 4, 4, True),
    (64, 64, 4, 3, True),
    (32, 64, 4, 3, True),
    (64, 128, 8, 4, True),
    (64, 64, 4, 3, False),
]
DQ = [
    (128, 32, 8, 3),
    (128, 32, 4, 5),
    (128, 32, 8, 5),
    (128, 32, 8, 4),
    (128, 32, 4, 3),
    (128, 64, 8, 3),
    (128, 64, 8, 4),
    (64, 32, 4, 3),
    (64, 64, 4, 3),
    (256, 32, 8, 3),
    (128, 128, 8, 3),
    (128, 64, 4, 4),
]


def load(relative: str):
    return load_module(ROOT / relative, "tune_" + Path(relative).stem)


def scratch(size: int, alignment: int, stream) -> torch.Tensor:
    return torch.empty(size, dtype=torch.int8, device=DEVICE)


# -- the trials: (part, case, label, config); build(trial, sizes) -> (launch, output getter, flops) -----------------


CANDIDATES: dict[str, Path] = {}  # label -> a folder with 09a.py and 09.py (a candidate forward), from --candidate


def trials(parts: list[str]) -> list[tuple]:
    found = []
    if "mm" in parts:
        for side in MM_SIZES:
            found += [("mm", side, "key", c) for c in MM_KEY] + [("mm", side, "tma", c) for c in MM_TMA]
    for d, causal in itertools.product((64, 128), (False, True)):
        if "fwd" in parts:
            found += [("fwd", (d, causal), "key", c) for c in FWD_KEY]
            found += [("fwd", (d, causal), "tma", c) for c in FWD_TMA]
            for label in CANDIDATES:
                found += [("fwd", (d, causal), label, c) for c in FWD_CANDIDATE]
        if "fwd-ws" in parts and not causal:  # warp specialisation, in a run of its own: its compiler may abort
            found += [("fwd", (d, causal), "tma", c) for c in FWD_TMA_WS]
        if "bwd" in parts:
            found += [("bwd", (d, causal), "dkdv", c) for c in DKDV] + [("bwd", (d, causal), "dq", c) for c in DQ]
        if "bwd-baselines" in parts:  # the backward's baselines and autotuned key alone, no fixed configs
            found += [("bwd", (d, causal), "none", None)]
        if "atomic" in parts:
            found += [("bwd", (d, causal), "atomic", c) for c in ATOMIC]
    return found


class Cases:
    """The inputs of each case, made once per process and size."""

    def __init__(self, attn: dict[str, int], mm_side: int | None, tutorial: Path | None = None) -> None:
        self.attn, self.mm_side, self.made = attn, mm_side, {}
        self.tutorial = tut06.load(tutorial) if tutorial else None
        self.tutorial_ran: set[tuple] | None = None
        self.k09, self.k10 = (
            load("solutions/09_flash_attention_v2_fwd.py"),
            load("solutions/10_flash_attention_v2_bwd.py"),
        )
        self.v04, self.v09 = (
            load("solutions/variants/04_tensor_descriptors.py"),
            load("solutions/variants/09_tensor_descriptors.py"),
        )
        self.k04 = load("solutions/04_matmul_fast.py")
        self.candidates = {
            label: load_module(folder / "09.py", f"tune_{label}_09", earlier=folder / "09a.py")
            for label, folder in CANDIDATES.items()
        }
        self.v10 = load("solutions/variants/10_atomic_dq.py")
        triton.set_allocator(scratch)

    def get(self, part: str, case) -> dict:
        key = (part, case)
        if key not in self.made:
            self.made.clear()  # one case at a time: the attention tensors are large
            torch.cuda.empty_cache()
            self.made[key] = self.make(part, case)
        return self.made[key]

    def make(self, part: str, case) -> dict:
        g = torch.Generator(device=DEVICE).manual_seed(0)
        if part == "mm":
            side = self.mm_side or case
            a, b = (torch.randn(side, side, device=DEVICE, dtype=torch.float16, generator=g) for _ in range(2))
            return dict(a=a, b=b, c=torch.empty_like(a), ref=None, flops=2.0 * side**3)
        d, causal = case
        shape = (self.attn["B"], self.attn["H"], self.attn["N"], d)
        q, k, v, do = (torch.randn(shape, device=DEVICE, dtype=torch.float16, generator=g) for _ in range(4))
        scale = 1 / math.sqrt(d)
        o, lse = self.k09.flash_attention_v2_fwd(q, k, v, causal, scale)
        made = dict(q=q, k=k, v=v, do=do, o=o, lse=lse, causal=causal, scale=scale, sm_scale=scale)
        made["flops"] = p10.work(made).flops if part == "bwd" else p09.work(made).flops  # as `make bench` counts
        if part == "bwd":
            bh, n = shape[0] * shape[1], shape[2]
            made["delta"] = torch.empty((bh, n), device=DEVICE, dtype=torch.float32)
            made["lse2"] = torch.empty((bh, n), device=DEVICE, dtype=torch.float32)
            self.k10._attn_bwd_preprocess[(triton.cdiv(n, 128), bh)](
                o,
                do,
                lse,
                made["delta"],
                made["lse2"],
                *o.stride(),
                *do.stride(),
                *lse.stride(),
                shape[1],
                n,
                BLOCK_M=128,
                HEAD_DIM=d,
            )
            made["dq"], made["dk"], made["dv"] = (torch.empty_like(q) for _ in range(3))
            made["dq32"] = torch.zeros(shape, device=DEVICE, dtype=torch.float32)
        return made


def launcher(cases: Cases, trial: tuple) -> tuple[Callable[[], None], dict]:
    part, case, label, config = trial
    x = cases.get(part, case)
    if part == "mm":
        bm, bn, bk, group, warps, stages = config
        a, b, c = x["a"], x["b"], x["c"]
        side = a.shape[0]
        grid = (triton.cdiv(side, bm) * triton.cdiv(side, bn),)
        meta = dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_SIZE_M=group, num_warps=warps, num_stages=stages)
        if label == "key":
            kernel = cases.k04.matmul_kernel.fn
            return (lambda: kernel[grid](a, b, c, side, side, side, *a.stride(), *b.stride(), *c.stride(), **meta)), x
        kernel = cases.v04.matmul_kernel.fn
        return (lambda: kernel[grid](a, b, c, side, side, side, a.stride(0), b.stride(0), c.stride(0), **meta)), x
    q, k, v, o, lse = x["q"], x["k"], x["v"], x["o"], x["lse"]
    bh, n, d = q.shape[0] * q.shape[1], q.shape[2], q.shape[3]
    h, causal, scale = q.shape[1], x["causal"], x["scale"]
    if part == "fwd":
        out, lse_out = torch.empty_like(o), torch.empty_like(lse)
        x["out"] = out
        if label == "key" or label in cases.candidates:
            bm, bn, warps, stages = config
            # the answer key of 9 builds on 9a's: 9a's kernel without the mask, 9's own with it
            module = cases.candidates.get(label, cases.k09)
            kernel = (module._attn_fwd_causal if causal else module._attn_fwd).fn
            strides = (*q.stride(), *k.stride(), *v.stride(), *out.stride())
            extra = {}
        else:
            bm, bn, warps, stages, ws = config
            kernel = cases.v09._attn_fwd.fn
            strides = (*q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *out.stride()[:3])
            extra = dict(WARP_SPECIALIZE=ws, CAUSAL=causal, EVEN_N=n % 128 == 0)
        grid = (triton.cdiv(n, bm), bh)
        return (
            lambda: kernel[grid](
                q,
                k,
                v,
                out,
                lse_out,
                scale,
                *strides,
                h,
                n,
                HEAD_DIM=d,
                BLOCK_M=bm,
                BLOCK_N=bn,
                num_warps=warps,
                num_stages=stages,
                **extra,
            )
        ), x
    do, delta, lse2 = x["do"], x["delta"], x["lse2"]
    if label == "atomic":  # the one-kernel backward: dQ added by atomics, per element or in bulk (TMA)
        bm, bn, warps, stages, bulk = config
        kernel, dk, dv, dq32 = cases.v10._attn_bwd_atomic.fn, x["dk"], x["dv"], x["dq32"]
        grid = (triton.cdiv(n, bn), bh)
        args = (
            q,
            k,
            v,
            do,
            dk,
            dv,
            dq32,
            lse2,
            delta,
            scale,
            *q.stride(),
            *k.stride(),
            *v.stride(),
            *do.stride(),
            *dk.stride(),
            *dv.stride(),
            h,
            n,
        )

        def launch() -> None:
            dq32.zero_()
            kernel[grid](
                *args,
                HEAD_DIM=d,
                CAUSAL=causal,
                BLOCK_M=bm,
                BLOCK_N=bn,
                BLK_SLICE_FACTOR=2,
                BULK_DQ=bulk,
                num_warps=warps,
                num_stages=stages,
            )

        return launch, x
    bm, bn, warps, stages = config
    if label == "dkdv":
        kernel, dk, dv = cases.k10._attn_bwd_dkdv.fn, x["dk"], x["dv"]
        grid = (triton.cdiv(n, bn), bh)
        args = (
            q,
            k,
            v,
            do,
            dk,
            dv,
            lse2,
            delta,
            scale,
            *q.stride(),
            *k.stride(),
            *v.stride(),
            *do.stride(),
            *dk.stride(),
            *dv.stride(),
            h,
            n,
        )
        meta = dict(BLOCK_M1=bm, BLOCK_N1=bn)
    else:
        kernel, dq = cases.k10._attn_bwd_dq.fn, x["dq"]
        grid = (triton.cdiv(n, bm), bh)
        args = (
            q,
            k,
            v,
            do,
            dq,
            lse2,
            delta,
            scale,
            *q.stride(),
            *k.stride(),
            *v.stride(),
            *do.stride(),
            *dq.stride(),
            h,
            n,
        )
        meta = dict(BLOCK_M2=bm, BLOCK_N2=bn)
    return (
        lambda: kernel[grid](
            *args, HEAD_DIM=d, CAUSAL=causal, BLK_SLICE_FACTOR=2, num_warps=warps, num_stages=stages, **meta
        )
    ), x


def compile_some(
    chunk: list[tuple], attn: dict[str, int] = SMALL, side: int = 512, candidates: dict[str, Path] | None = None
) -> list[str]:
    """In a worker: launch each trial once at a small size, so that its binary lands in the disk cache."""
    CANDIDATES.update(candidates or {})
    cases, problems = Cases(attn, side), []
    for trial in chunk:
        if trial[2] == "none":  # a case timed for its baselines only
            continue
        try:
            launch, _ = launcher(cases, trial)
            launch()
            if DEVICE == "cuda":
                torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001 - a config that does not compile is a result
            problems.append(f"{trial}: {type(exc).__name__}: {' '.join(str(exc).split())[:160]}")
    return problems


def baselines(cases: Cases, part: str, case) -> dict[str, float]:
    """Milliseconds of the torch baselines of one case, in this run: those of the puzzles' specs."""
    x = cases.get(part, case)
    if part == "mm":
        return {"cublas": bench_ms(lambda: torch.matmul(x["a"], x["b"]), rep=REP_MS)}
    if part == "bwd":  # SDPA's flash backward (falling back to torch's choice), and its cuDNN one
        calls = {"sdpa flash": p10.baseline(x), **p10.baselines(x)}
    else:
        calls = p09.sdpa_backends(x, x["causal"])
    if cases.tutorial is not None:
        extra = tut06.backward_calls if part == "bwd" else tut06.forward_calls
        calls.update(extra(cases.tutorial, x, cases.tutorial_ran))
    found = {name: bench_ms(fn, rep=REP_MS) for name, fn in calls.items()}
    if cases.tutorial is not None and part == "fwd":
        print(f"    tutorial 06's autotuner chose {getattr(cases.tutorial._attn_fwd, 'best_config', None)}", flush=True)
    args = (x["q"], x["k"], x["v"])
    if part == "bwd":  # the answer key's whole backward, as graded: preprocess + dK/dV + dQ, autotuned
        rest = (x["o"], x["lse"], x["do"], x["causal"], x["scale"])
        found["key (autotuned)"] = bench_ms(lambda: cases.k10.flash_attention_v2_bwd(*args, *rest), rep=REP_MS)
    else:
        fwd = (x["causal"], x["scale"])
        found["key (autotuned)"] = bench_ms(lambda: cases.k09.flash_attention_v2_fwd(*args, *fwd), rep=REP_MS)
        found["tma variant (autotuned)"] = bench_ms(lambda: cases.v09.flash_attention_v2_fwd(*args, *fwd), rep=REP_MS)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench tune-keys", description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default="mm,fwd,bwd")
    parser.add_argument("--jobs", type=int, default=14)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--n", type=int, default=ATTN["N"], help="the attention cases' sequence length")
    parser.add_argument("--tutorial", type=Path, help="a copy of Triton's 06-fused-attention.py, timed beside the keys")
    parser.add_argument(
        "--candidate",
        type=Path,
        action="append",
        default=[],
        help="a folder with 09a.py and 09.py: a candidate forward, timed beside the key (repeatable)",
    )
    parser.add_argument("--dry", action="store_true", help="run one trial of each kind at a tiny size (CPU)")
    args = parser.parse_args(argv)
    CANDIDATES.update({folder.name: folder.resolve() for folder in args.candidate})
    if args.dry:  # TRITON_INTERPRET=1 python -m bench tune-keys --dry
        picked = {(t[0], t[2]): t for t in trials(args.parts.split(","))}
        print(compile_some(list(picked.values()), dict(B=1, H=2, N=200), 256))
        return 0
    parts, start = args.parts.split(","), time.monotonic()
    print(
        f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        flush=True,
    )
    todo = trials(parts)
    chunks = [todo[i :: args.jobs] for i in range(args.jobs)]
    failed = []
    with ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(compile_some, chunk, SMALL, 512, CANDIDATES) for chunk in chunks]
        for chunk, future in zip(chunks, futures, strict=True):
            try:
                failed += future.result()
            except BrokenProcessPool:  # a compiler that aborts takes its worker down: time those here
                failed.append(f"a worker died compiling one of {len(chunk)} trials")
    print(f"compiled {len(todo)} trials in {time.monotonic() - start:.0f} s; {len(failed)} did not run:", flush=True)
    for problem in failed:
        print("   ", problem)
    cases, results = Cases({**ATTN, "N": args.n}, None, args.tutorial), []
    if cases.tutorial is not None:
        shapes = [(ATTN["B"], ATTN["H"], args.n, *case) for part, case, *_ in todo if part != "mm"]
        cases.tutorial_ran, problems = tut06.precompile(args.tutorial, shapes, jobs=8)
        took = time.monotonic() - start
        print(f"tutorial 06, {tut06.describe(args.tutorial)}: compiled by {took:.0f} s", flush=True)
        for (shape, ws), problem in sorted(problems.items()):
            print(f"    tutorial 06 (warp_specialize={ws}) did not run at {shape}: {problem}", flush=True)
    for (part, case), group in itertools.groupby(todo, key=lambda t: (t[0], t[1])):
        group = list(group)
        try:
            base = baselines(cases, part, case)
        except Exception:  # noqa: BLE001
            traceback.print_exc()
            base = {}
        flops = cases.get(part, case)["flops"]
        print(
            f"\n{part} {case}: "
            + ", ".join(f"{k} {flops / ms / 1e9:.0f} TFLOPS ({ms:.3f} ms)" for k, ms in base.items()),
            flush=True,
        )
        rows = []
        for trial in group:
            if trial[2] == "none":
                continue
            try:
                launch, x = launcher(cases, trial)
                handle = launch()
                regs = getattr(handle, "n_regs", None)
                ms = bench_ms(launch, rep=REP_MS)
                error = "" if regs is None else f" regs {regs} spills {handle.n_spills}"
                if part == "fwd":
                    ref = x["o"]
                    error += f" max|o - key| {float((x['out'].float() - ref.float()).abs().max()):.1e}"
                rows.append((ms, trial, error))
            except Exception as exc:  # noqa: BLE001
                print(f"    {trial[2]} {trial[3]}: {type(exc).__name__}: {' '.join(str(exc).split())[:120]}")
        for ms, trial, error in sorted(rows):
            ratios = " ".join(f"{base[k] / ms:.2f}x {k}" for k in base if not k.startswith(("key", "tma")))
            print(f"    {trial[2]:5} {str(trial[3]):28} {ms:8.3f} ms {flops / ms / 1e9:6.0f} TFLOPS  {ratios}{error}")
        results.append(
            {
                "part": part,
                "case": list(case) if isinstance(case, tuple) else case,
                "baselines_ms": base,
                "flops": flops,
                "trials": [{"label": t[2], "config": list(t[3]), "ms": ms} for ms, t, _ in rows],
            }
        )
        sys.stdout.flush()
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    overhead(cases)
    print(f"\ndone in {time.monotonic() - start:.0f} s")
    return 0


def overhead(cases: Cases) -> None:
    """Host time per call of matmul_fast at a small size, against a direct launch of the same kernel."""
    a = torch.randn(512, 512, device=DEVICE, dtype=torch.float16)
    b = torch.randn(512, 512, device=DEVICE, dtype=torch.float16)
    cases.k04.matmul_fast(a, b)
    torch.cuda.synchronize()
    for name, fn in (
        ("matmul_fast 512^3", lambda: cases.k04.matmul_fast(a, b)),
        ("torch.matmul 512^3", lambda: torch.matmul(a, b)),
    ):
        t0 = time.perf_counter()
        for _ in range(200):
            fn()
        torch.cuda.synchronize()
        host = (time.perf_counter() - t0) / 200 * 1e6
        print(f"{name}: {host:.1f} us per call (host loop), do_bench {bench_ms(fn, rep=REP_MS) * 1e3:.1f} us")
    print("matmul_fast best config at 512^3:", cases.k04.matmul_kernel.best_config)


if __name__ == "__main__":
    raise SystemExit(main())
