"""Watch a submission while it runs: which Triton kernels it launches and what it allocates.

Launches are counted by wrapping the `run` method of Triton's kernel classes (the compiled
`JITFunction` and the interpreter's `InterpretedFunction`); both paths, `kernel[grid](...)` and
autotuned kernels, end there. With `skip=True` the wrapper launches nothing: if the answer is
still right, the kernels did not compute it.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch

from checks.engine.memory import Arena, poisonable


@dataclass
class Launch:
    kernel: str
    filename: str
    blocks: dict[str, int] = field(default_factory=dict)  # BLOCK_* constants passed by keyword


@dataclass
class Tracker:
    """What the submission did during one graded call."""

    own_files: set[str]
    launches: list[Launch] = field(default_factory=list)
    skip: bool = False
    reads: Reads | None = None  # filled in the interpreter

    def own(self, launch: Launch) -> bool:
        return launch.filename in self.own_files

    @property
    def own_launches(self) -> list[Launch]:
        return [launch for launch in self.launches if self.own(launch)]


def _kernel_classes() -> list[type]:
    import triton.runtime.jit as jit

    classes: list[type] = [jit.JITFunction]
    with contextlib.suppress(ImportError, AttributeError):
        from triton.runtime.interpreter import InterpretedFunction

        classes.append(InterpretedFunction)
    return classes


def _source_file(kernel: object) -> str:
    fn = getattr(kernel, "fn", None)
    code = getattr(fn, "__code__", None)
    return str(Path(code.co_filename).resolve()) if code is not None else "?"


@contextlib.contextmanager
def watch_launches(tracker: Tracker) -> Iterator[Tracker]:
    """Record (or, with tracker.skip, swallow) every Triton kernel launch inside the block."""
    originals = {cls: cls.run for cls in _kernel_classes()}

    def wrap(original: Callable) -> Callable:
        @functools.wraps(original)
        def run(self, *args, **kwargs):
            bound = dict(zip(getattr(self, "arg_names", []), args, strict=False))
            bound.update(kwargs)
            blocks = {k: int(v) for k, v in bound.items() if k.startswith("BLOCK") and isinstance(v, int)}
            launch = Launch(getattr(getattr(self, "fn", None), "__name__", "?"), _source_file(self), blocks)
            tracker.launches.append(launch)
            if tracker.skip and tracker.own(launch):
                return None
            return original(self, *args, **kwargs)

        return run

    try:
        for cls, original in originals.items():
            cls.run = wrap(original)
        yield tracker
    finally:
        for cls, original in originals.items():
            cls.run = original


_EMPTY = ("empty", "empty_like", "empty_strided")
_FILLED = ("zeros", "zeros_like", "ones", "ones_like", "full", "full_like")


@contextlib.contextmanager
def guard_allocations(arena: Arena) -> Iterator[None]:
    """Give every float tensor the submission allocates guard bands; poison the `empty` ones."""

    def wrap(original: Callable, poison: bool) -> Callable:
        @functools.wraps(original)
        def allocate(*args, **kwargs):
            t = original(*args, **kwargs)
            if (
                kwargs.get("out") is not None
                or not isinstance(t, torch.Tensor)
                or t.requires_grad
                or t.layout != torch.strided
                or not poisonable(t.dtype)
                or t.numel() == 0
                or str(t.device.type) != torch.device(arena.device).type
            ):
                return t
            return arena.adopt(t, poison)

        return allocate

    patched: list[tuple[object, str, Callable]] = []
    for name in _EMPTY + _FILLED:
        patched.append((torch, name, getattr(torch, name)))
    patched.append((torch.Tensor, "new_empty", torch.Tensor.new_empty))
    patched.append((torch.Tensor, "new_zeros", torch.Tensor.new_zeros))
    try:
        for owner, name, original in patched:
            setattr(owner, name, wrap(original, poison=name.startswith(("empty", "new_empty"))))
        yield
    finally:
        for owner, name, original in patched:
            setattr(owner, name, original)


@dataclass
class Reads:
    """What the learner's kernels loaded, seen in the interpreter: per input, per load, and out of bounds."""

    regions: dict[str, tuple[int, int, int]]  # input name -> (first byte, end byte, elements in the view)
    arena: Arena | None = None  # its guard bands are out of bounds for every load
    counts: dict[str, int] = field(default_factory=dict)
    widest: int = 0  # the most lanes a single tl.load had
    outside: dict[str, int] = field(default_factory=dict)  # buffer label -> loads that hit its guard bands

    def per_element(self, name: str) -> float:
        return self.counts.get(name, 0) / max(1, self.regions[name][2])

    def summary(self) -> dict:
        """What the rules need, as plain data: loads per element of each input, the widest load, loads outside."""
        return {
            "loads_per_element": {name: self.per_element(name) for name in self.regions},
            "widest": self.widest,
            "outside": dict(self.outside),
        }

    def record(self, addresses, on) -> None:
        import numpy as np

        self.widest = max(self.widest, int(addresses.size))
        loaded = addresses[on]
        if not loaded.size:
            return
        for name, (start, end, _) in self.regions.items():
            hit = int(np.count_nonzero((loaded >= start) & (loaded < end)))
            if hit:
                self.counts[name] = self.counts.get(name, 0) + hit
        for entry in self.arena.buffers if self.arena else []:
            size = entry.buf.element_size()
            low = entry.buf.data_ptr()
            body, body_end = low + entry.guard * size, low + (entry.guard + entry.size) * size
            high = low + entry.buf.numel() * size
            hit = int(np.count_nonzero(((loaded >= low) & (loaded < body)) | ((loaded >= body_end) & (loaded < high))))
            if hit:
                label = f"the input {entry.label}" if entry.role == "input" else entry.label
                self.outside[label] = self.outside.get(label, 0) + hit


@contextlib.contextmanager
def watch_loads(reads: Reads) -> Iterator[Reads]:
    """In Triton's interpreter, see every load's addresses (the lanes its mask lets through)."""
    import numpy as np
    from triton.runtime.interpreter import InterpreterBuilder

    original = InterpreterBuilder.create_masked_load

    def create_masked_load(self, ptrs, mask, *args, **kwargs):
        addresses = np.asarray(ptrs.data).astype(np.uint64, copy=False)
        reads.record(addresses, np.broadcast_to(np.asarray(mask.data, dtype=bool), addresses.shape))
        return original(self, ptrs, mask, *args, **kwargs)

    InterpreterBuilder.create_masked_load = create_masked_load
    try:
        yield reads
    finally:
        InterpreterBuilder.create_masked_load = original


def input_regions(inputs: dict) -> dict[str, tuple[int, int, int]]:
    """The byte range each tensor input spans in memory, and how many elements it has."""
    regions = {}
    for name, t in inputs.items():
        if isinstance(t, torch.Tensor) and t.numel():
            low = sum((n - 1) * s for n, s in zip(t.shape, t.stride(), strict=True) if s < 0)
            high = sum((n - 1) * s for n, s in zip(t.shape, t.stride(), strict=True) if s > 0)
            start = t.data_ptr() + low * t.element_size()
            regions[name] = (start, t.data_ptr() + (high + 1) * t.element_size(), t.numel())
    return regions
