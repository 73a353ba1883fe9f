"""Compile the decoding answer keys' kernels (puzzles 11, 12 and 13) for a Hopper GPU (sm_90a) on a machine without
one, at the launch shapes their host functions choose on a GPU of 132 SMs (an H100 SXM or an H200) for the timing
sweep of puzzles.yaml, and report the shared memory, registers and spills of each kernel and the programs per SM
they allow. Nothing is run or timed: this is what the compiler gives, not what a GPU measured.

Each launch of a key's host function is caught before it runs: its arguments are specialized by Triton's own
binder as a launch on a GPU would (an int equal to 1 becomes a constant, a pointer or an int divisible by 16 is
marked so), the kernel is compiled for sm_90a, and ptxas from Triton's wheel reports registers and spills. The
inputs are meta tensors (shapes and strides, no memory).

Run from the course root (which `bench` is imported from):
`PYTHONPATH=. python bench/results/2026-12-06-cpu-sm90a-occupancy/occupancy.py > occupancy.txt`."""

from __future__ import annotations

import glob
import hashlib
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource, make_backend
from triton.runtime.jit import JITFunction, create_function_from_signature

ROOT = Path(__file__).resolve().parents[3]
TARGET = GPUTarget("cuda", 90, 32)
BIN = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
SMS = 132  # an H100 SXM and an H200 both have 132 SMs
# Per SM on sm_90 (CUDA C Programming Guide, "Technical Specifications per Compute Capability", 9.0):
SHARED_PER_SM = 228 * 1024  # bytes; a block may use at most 227 KiB, and the driver reserves 1 KiB per block
SHARED_PER_BLOCK = 227 * 1024
RESERVED_PER_BLOCK = 1024
REGISTERS_PER_SM = 65536  # allocated per warp in units of 256 registers
WARPS_PER_SM = 64
BLOCKS_PER_SM = 32
TIMING_N = (1024, 4096, 16384, 65536, 131072)
H_Q, H_KV, D, PAGE_SIZE = 32, 8, 128, 16  # the sweep's heads, head dimension and pages of puzzle 13
SCALE = D**-0.5


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"key_{name}", ROOT / "solutions" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def ptxas_registers(ptx: str) -> tuple[int, int]:
    """(registers per thread, bytes of spill stores) that ptxas reports for the kernel's PTX on sm_90a."""
    ptxas = sorted(glob.glob(str(BIN / "ptxas*")))[0]
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "k.ptx")
        Path(path).write_text(ptx)
        info = subprocess.run([ptxas, "-v", "--gpu-name=sm_90a", path, "-o", path + ".cubin"],
                              capture_output=True, text=True, check=True).stderr  # fmt: skip
    registers = int(re.search(r"Used (\d+) registers", info).group(1))
    spills = re.search(r"(\d+) bytes spill stores", info)
    return registers, int(spills.group(1)) if spills else 0


def sass_counts(cubin: bytes) -> dict[str, int]:
    """Instructions of the kernel's machine code (SASS) that say how it loads and multiplies: cp.async copies from
    global to shared memory (LDGSTS, what Triton's software pipelining of loads uses on sm_90), and the tensor-core
    instructions of Hopper (HGMMA, wgmma) and of earlier GPUs (HMMA, mma)."""
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "k.cubin")
        Path(path).write_bytes(cubin)
        sass = subprocess.run([str(BIN / "cuobjdump"), "--dump-sass", path], capture_output=True, text=True,
                              check=True).stdout  # fmt: skip
    return {name: len(re.findall(rf"\b{name}\b", sass)) for name in ("LDGSTS", "HGMMA", "HMMA")}


def pipeline_buffers(ttgir: str) -> str:
    """The shared-memory buffers that the kernel's loads copy into ahead of use (the mutable allocations of its
    Triton GPU IR, `stages x rows x columns`), or "-" where it has none."""
    found = re.findall(r"ttg\.local_alloc\s*:\s*\(\)\s*->\s*!ttg\.memdesc<([0-9x]+)x(f16|f32|i32)[^>]*mutable>", ttgir)
    return " ".join(f"{shape}x{dtype}" for shape, dtype in found) or "-"


def programs_per_sm(shared: int, registers: int, num_warps: int) -> dict[str, int]:
    """How many programs of this kernel one SM holds at once, by each of its limits, and the least of them."""
    per_warp = -(-registers * 32 // 256) * 256
    limits = {
        "by_shared": SHARED_PER_SM // (shared + RESERVED_PER_BLOCK) if shared <= SHARED_PER_BLOCK else 0,
        "by_registers": REGISTERS_PER_SM // (per_warp * num_warps),
        "by_warps": WARPS_PER_SM // num_warps,
        "by_blocks": BLOCKS_PER_SM,
    }
    return {**limits, "programs": min(limits.values())}


class Launches:
    """Stands in for JITFunction.run: compiles each launch for sm_90a instead of running it, once per kernel."""

    def __init__(self) -> None:
        self.seen: list[dict] = []
        self.cache: dict[tuple, dict] = {}

    def run(self, fn: JITFunction, *args, grid, warmup, **kwargs):
        backend = make_backend(TARGET)
        binder = create_function_from_signature(fn.signature, fn.params, backend)
        bound_args, specialization, options = binder(*args, **kwargs)
        options, signature, constexprs, attrs = fn._pack_args(backend, kwargs, bound_args, specialization, options)
        key = (fn.__name__, repr(sorted(signature.items())), repr(sorted(constexprs.items())), repr(attrs),
               options.num_warps, options.num_stages)  # fmt: skip
        if key not in self.cache:
            kernel = triton.compile(ASTSource(fn, signature, constexprs, attrs), target=TARGET,
                                    options=options.__dict__)  # fmt: skip
            registers, spills = ptxas_registers(kernel.asm["ptx"])
            shared = kernel.metadata.shared
            ptx = re.sub(r"^//.*$", "", kernel.asm["ptx"], flags=re.M)  # without the comments that name the build
            self.cache[key] = {
                "shared": shared,
                "registers": registers,
                "spills": spills,
                **sass_counts(kernel.asm["cubin"]),
                "ptx": hashlib.sha256(ptx.encode()).hexdigest()[:12],
                "buffers": pipeline_buffers(kernel.asm["ttgir"]),
                **programs_per_sm(shared, registers, options.num_warps),
            }
        constants = {name: value for (i,), value in constexprs.items() for name in [fn.arg_names[i]]
                     if fn.params[i].is_constexpr}  # fmt: skip
        self.seen.append({"kernel": fn.__name__, "grid": tuple(grid), "num_warps": options.num_warps,
                          "num_stages": options.num_stages, "constexprs": constants, **self.cache[key]})  # fmt: skip


def on_gpu_of_132_sms(module) -> None:
    """The key's launch_shape takes its GPU branch for the meta tensors, as on a GPU of 132 SMs."""
    original = module.launch_shape
    module.sm_count = lambda device: SMS
    module.launch_shape = lambda *args: original(*args[:-1], SimpleNamespace(type="cuda"))


def calls():
    """(puzzle, series, N, call) at every size of the timing sweep of puzzles.yaml (series B=1 and B=16)."""
    keys = {"11": load("11_flash_decoding"), "12": load("12_gqa_decoding"), "13": load("13_paged_decoding")}
    paged = keys["13"].paged_decoding
    for module in keys.values():
        on_gpu_of_132_sms(module)
    meta = {"device": "meta", "dtype": torch.float16}
    for B in (1, 16):
        for N in TIMING_N:
            q = torch.empty(B, H_Q, D, **meta)
            k, v = (torch.empty(B, H_Q, N, D, **meta) for _ in range(2))
            yield "11", f"B={B} H=32", N, lambda q=q, k=k, v=v: keys["11"].flash_decoding(q, k, v, SCALE)
            k, v = (torch.empty(B, H_KV, N, D, **meta) for _ in range(2))
            yield "12", f"B={B} H=32:8", N, lambda q=q, k=k, v=v: keys["12"].gqa_decoding(q, k, v, SCALE)
            k, v = (torch.empty(B * N // PAGE_SIZE, PAGE_SIZE, H_KV, D, **meta) for _ in range(2))
            table = torch.empty(B, N // PAGE_SIZE, dtype=torch.int32, device="meta")
            lens = torch.empty(B, dtype=torch.int32, device="meta")
            yield "13", f"B={B} H=32:8", N, lambda q=q, k=k, v=v, t=table, n=lens: paged(q, k, v, t, n, SCALE)


def sweep_of_puzzle_11():
    """(form, BLOCK_N, warps, stages, call): puzzle 11's key at the sweep's shapes of bench/tune_flash_decoding.py
    (eight programs per SM), its tensor-core split kernel or the vector form, at B = 1, H = 32, N = 4096."""
    from bench.decoding_launch import at_launch_shape
    from bench.tune_flash_decoding import SWEEP, _split_vector

    key = load("11_flash_decoding")
    q = torch.empty(1, H_Q, D, dtype=torch.float16, device="meta")
    k, v = (torch.empty(1, H_Q, 4096, D, dtype=torch.float16, device="meta") for _ in range(2))
    for form, shapes in SWEEP.items():
        for per_sm, block_n, warps, stages in shapes:
            if per_sm == 8:
                split = _split_vector if form == "vector" else None
                call = at_launch_shape(key, "11", per_sm, block_n, warps, stages, split_kernel=split)
                yield form, block_n, warps, stages, lambda call=call: call(q, k, v, SCALE)


def row(r: dict) -> str:
    """The compiler's figures of one kernel: shared memory, registers, spills, programs per SM (and each limit),
    instruction counts and the buffers its loads copy into ahead of use."""
    limits = f"({r['by_shared']}/{r['by_registers']}/{r['by_warps']})"
    return (
        f"{r['shared']:8} {r['registers']:4} {r['spills']:6}  {r['programs']:2} {limits:10}"
        f" {r['LDGSTS']:6} {r['HGMMA']:5} {r['HMMA']:4}  {r['buffers']}"
    )


FIGURES = "shared B regs spills  per SM (shared/regs/warps) LDGSTS HGMMA HMMA  buffers copied ahead"


def main() -> int:
    launches = Launches()
    print(
        f"sm_90a, compiled offline: Triton {triton.__version__}, torch {torch.__version__}, "
        f"Python {sys.version.split()[0]}; programs per SM for {SMS} SMs of 228 KiB shared memory "
        f"(227 KiB a block, 1 KiB reserved per block), {REGISTERS_PER_SM} registers, {WARPS_PER_SM} warps"
    )
    print(f"{'puzzle':6} {'series':11} {'N':>7} {'kernel':18} {'grid':10} warps stages {FIGURES}  constexprs")
    with mock.patch.object(JITFunction, "run", lambda fn, *a, **kw: launches.run(fn, *a, **kw)):
        for puzzle, series, N, call in calls():
            launches.seen.clear()
            call()
            for r in launches.seen:
                constants = ",".join(f"{k}={v}" for k, v in r["constexprs"].items())
                print(
                    f"{puzzle:6} {series:11} {N:7} {r['kernel']:18} {str(r['grid']):10} {r['num_warps']:5} "
                    f"{r['num_stages']:6} {row(r)}  {constants}"
                )
        print(
            "\npuzzle 11's split kernel in the two forms of bench/tune_flash_decoding.py, 8 programs per SM, "
            "B = 1, H = 32, N = 4096 (ptx: a hash of the PTX without its comments; the same hash, the same code)"
        )
        print(f"form    BLOCK_N warps stages ptx          {FIGURES}")
        for form, block_n, warps, stages, call in sweep_of_puzzle_11():
            launches.seen.clear()
            call()
            r = next(r for r in launches.seen if r["kernel"] != "_attn_decode_merge")
            print(f"{form:7} {block_n:7} {warps:5} {stages:6} {r['ptx']} {row(r)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
