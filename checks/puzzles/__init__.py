"""One module per puzzle: how to draw its inputs and what the right answer is.

Each module defines

    make_inputs(case, arena) -> dict       the call's arguments, in order (tensors from the arena)
    reference(inputs) -> list[Expected]    each output: name, value (float32/float64), dtype, dims
    baseline(inputs) -> Callable           the torch operation the GPU timing compares with
    work(inputs) -> Work                   bytes moved and flops done, for GB/s and TFLOPS

and may define `baselines(inputs) -> dict[name, Callable]`: more baselines that `make bench` (checks.instructor.bench)
times and plots beside `baseline` (attention: SDPA held to its flash and cuDNN backends, where they run, and
for puzzle 9 the unfused attention, S and P through memory, where they fit).
A case may hold more than the graded cases use (softmax's `dtype: float16`) where the benchmark needs it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import torch

from checks.registry import Puzzle


@dataclass
class Expected:
    """One output the learner's function must return."""

    name: str
    value: torch.Tensor  # the reference, in float32 or float64
    dtype: torch.dtype  # the dtype the learner must return
    dims: tuple[str, ...]  # a word for each dimension, used to say where values are wrong
    contiguous: bool = False  # whether the contract asks for a contiguous result


@dataclass
class Work:
    bytes: float
    flops: float = 0.0


def spec_module(puzzle: Puzzle) -> ModuleType:
    return importlib.import_module(f"checks.puzzles.p{puzzle.stem}")


BaselineFn = Callable[[], Any]


def sdpa_held_to(backends: tuple[tuple[str, Any], ...], attention: Callable[[], Any]) -> dict[str, BaselineFn]:
    """`make bench`'s other baselines: `attention` (a call of torch's scaled_dot_product_attention) held to each of
    `backends` ((name, torch.nn.attention.SDPBackend) pairs) that runs it here, by name."""
    from torch.nn.attention import sdpa_kernel

    found: dict[str, BaselineFn] = {}
    for name, backend in backends:

        def call(backend: Any = backend) -> Any:
            with sdpa_kernel(backend):
                return attention()

        try:
            call()
        except RuntimeError:  # this backend has no kernel for this device, dtype or shape
            continue
        found[name] = call
    return found
