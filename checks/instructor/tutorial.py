"""Triton's fused-attention tutorial (tutorial 06) as a benchmark baseline, loaded from a file the user names.

`make bench TUTORIAL=path/to/06-fused-attention.py` (and `python -m bench tune-keys --tutorial PATH`) time the answer
keys of puzzles 9 and 10 beside the tutorial's own kernels, in the same run and on the same inputs. The course
ships none of the tutorial's code: the file comes from a copy of Triton's repository (its
`python/tutorials/06-fused-attention.py`). Its `attention(q, k, v, causal, sm_scale, warp_specialize)` is called
as published, with Triton's automatic warp specialisation off ("tutorial 06") and on ("tutorial 06 ws"; the
forward only, the backward does not use it).

The tutorial autotunes about 27 forward configs for every sequence length (N_CTX is a compile-time constant
there), one after the other. `precompile` first runs each (shape, setting) once in a process of its own, many
at a time, so that the binaries land in Triton's disk cache and the timed run only benchmarks them; a setting
whose compiler fails (or aborts its process) for a shape has no row for that shape.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import os
import subprocess
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from checks.engine.submission import load_module

BaselineFn = Callable[[], Any]
FORWARD = {"tutorial 06": False, "tutorial 06 ws": True}  # series name -> warp_specialize
BACKWARD = "tutorial 06"
Shape = tuple[int, int, int, int, bool]  # B, H, N, D, causal


def load(path: Path) -> ModuleType:
    """The tutorial's module; a file without `attention` is not the tutorial, and says so."""
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist: give the path of a copy of 06-fused-attention.py.")
    module = load_module(path, "tutorial_06_fused_attention")
    if not callable(getattr(module, "attention", None)):
        raise ValueError(f"{path} defines no attention(q, k, v, causal, sm_scale, warp_specialize): is it tutorial 06?")
    return module


def describe(path: Path) -> str:
    """What the records say of the file: its name and the first 12 hex digits of its SHA-256."""
    return f"{path.name} (sha256 {hashlib.sha256(path.read_bytes()).hexdigest()[:12]})"


def shape_of(inputs: dict[str, Any]) -> Shape:
    b, h, n, d = inputs["q"].shape
    return (b, h, n, d, bool(inputs["causal"]))


def precompile(
    path: Path, shapes: Iterable[Shape], jobs: int | None = None, timeout: float = 600.0
) -> tuple[set[tuple], dict[tuple, str]]:
    """Run the tutorial once per (shape, warp_specialize) in parallel processes: the pairs that ran, and for
    each pair that did not, the last line its process printed (a compiler error, or how it ended)."""
    todo = [(s, ws) for s, ws in itertools.product(dict.fromkeys(shapes), FORWARD.values())]
    jobs = jobs or max(1, min(len(todo), (os.cpu_count() or 2) - 2))
    ran: set[tuple] = set()
    failed: dict[tuple, str] = {}
    for start in range(0, len(todo), jobs):
        batch = todo[start : start + jobs]
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", "checks.instructor.tutorial", str(path), *(str(int(x)) for x in (*shape, ws))],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            for shape, ws in batch
        ]
        for pair, proc in zip(batch, procs, strict=True):
            try:
                err = proc.communicate(timeout=timeout)[1]
            except subprocess.TimeoutExpired:
                proc.kill()
                err = proc.communicate()[1] + f"\nstill compiling after {timeout:.0f} s"
            if proc.returncode == 0:
                ran.add(pair)
            else:
                lines = [line for line in err.splitlines() if line.strip()] or [f"exit status {proc.returncode}"]
                failed[pair] = lines[-1][:200]
    return ran, failed


def forward_calls(tutorial: ModuleType, inputs: dict[str, Any], ran: set[tuple] | None = None) -> dict[str, BaselineFn]:
    """The tutorial's forward per warp-specialisation setting that ran for this shape (all, when `ran` is None)."""
    q, k, v = (inputs[name].contiguous() for name in ("q", "k", "v"))  # its descriptors assume (B, H, N, D) rows
    causal, scale, shape = inputs["causal"], inputs["sm_scale"], shape_of(inputs)
    found: dict[str, BaselineFn] = {}
    for name, ws in FORWARD.items():
        if ran is None or (shape, ws) in ran:
            found[name] = lambda ws=ws: tutorial.attention(q, k, v, causal, scale, ws)
    return found


def backward_calls(
    tutorial: ModuleType, inputs: dict[str, Any], ran: set[tuple] | None = None
) -> dict[str, BaselineFn]:
    """The tutorial's backward alone (its forward runs once here, outside the timing), where its forward ran."""
    if ran is not None and (shape_of(inputs), False) not in ran:
        return {}
    q, k, v = (inputs[n].detach().contiguous().clone().requires_grad_(True) for n in ("q", "k", "v"))
    o = tutorial.attention(q, k, v, inputs["causal"], inputs["sm_scale"], False)
    do = inputs["do"].contiguous()
    return {BACKWARD: lambda: torch.autograd.grad(o, (q, k, v), do, retain_graph=True)}


def _run_once(path: Path, shape: Shape, ws: bool) -> None:
    """In a worker process: the forward (and, without warp specialisation, the backward) once at this shape."""
    b, h, n, d, causal = shape
    tutorial = load(path)
    q, k, v, do = (torch.randn((b, h, n, d), device="cuda", dtype=torch.float16) for _ in range(4))
    q.requires_grad_(not ws)
    k.requires_grad_(not ws)
    v.requires_grad_(not ws)
    o = tutorial.attention(q, k, v, causal, 1 / math.sqrt(d), ws)
    if not ws:
        torch.autograd.grad(o, (q, k, v), do)
    torch.cuda.synchronize()


if __name__ == "__main__":  # python -m checks.instructor.tutorial PATH B H N D CAUSAL WS (precompile's workers)
    file, *numbers = sys.argv[1:]
    b, h, n, d, causal, ws = (int(x) for x in numbers)
    _run_once(Path(file), (b, h, n, d, bool(causal)), bool(ws))
