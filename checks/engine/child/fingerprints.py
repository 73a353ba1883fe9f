"""Where the values a kernel reads and a function returns came from, seen in memory (in the grading process).

Every tensor argument of every launch is fingerprinted (a hash of its whole storage) before and after
the launch, and every returned output at return. The fingerprints a storage had right after each launch
are remembered with who made them; a storage whose fingerprint changed since then, with no kernel of the
learner's running, was written by the host: by torch, numpy, a Python list, another thread, anything.
Because it compares memory, not calls, it does not matter which library or thread wrote.

Origins of a storage, at a launch of one of the learner's kernels:

    input       one of the grader's inputs, unchanged
    fill        allocated while graded (torch.empty/zeros/full...) and unchanged since; or every element
                of the argument holds one value (an in-place zero_/fill_)
    copy        the same values as an input or as a buffer a kernel wrote, in any layout or dtype
                (.contiguous(), .to, .clone, copy_ of an input)
    kernel      a launch of the learner's own kernels changed it, and nothing has since
    host        anything else: computed outside the learner's kernels

A returned output must be of origin `kernel`, or a layout or dtype copy the wrapper made of a tensor a
kernel wrote (`kernel copy`: an accumulator of atomics returned as `.to(torch.float16)`).

The grading process reports, as observations, the arguments of origin `host` that a kernel received
(`host_reads`) and the origin of every returned output (`output_origins`);
`checks.engine.rules.provenance` judges them in the grader.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import math
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from checks.engine.memory import _empty

INPUT, FILL, COPY, KERNEL, HOST, UNSEEN = "input", "fill", "copy", "kernel", "host", "unseen"
KERNEL_COPY = "kernel copy"  # a returned output that is a layout or dtype copy of what a kernel wrote
CLEAN = (INPUT, FILL, COPY, KERNEL)
MAX_HOST_READS = 8  # arguments of host origin reported per call; the first one is what a message names
_ALLOCATORS = ("empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like")
_TENSOR_ALLOCATORS = ("new_empty", "new_zeros", "new_ones", "new_full")


def storage_key(t: torch.Tensor) -> tuple[str, int, int]:
    storage = t.untyped_storage()
    return (t.device.type, storage.data_ptr(), storage.nbytes())


def fingerprint(t: torch.Tensor) -> bytes:
    """A digest of every byte of the storage under `t` (the whole buffer, not only the view); for a tensor with
    no data to read (a meta tensor), its device alone: `output_form` then says where it should be."""
    if t.device.type not in ("cpu", "cuda"):
        return f"no data on {t.device.type}".encode()
    storage = t.untyped_storage()
    nbytes = storage.nbytes()
    raw = _empty(0, dtype=torch.uint8, device=t.device).set_(storage, 0, (nbytes,), (1,))
    if raw.device.type == "cpu":
        return hashlib.blake2b(raw.numpy(), digest_size=16).digest()
    # on a GPU: sums over the 32-bit words, plain, weighted and xor-ed by position, computed on the device (no
    # copy of the buffer to the host; two temporaries the size of the buffer)
    words = raw[: nbytes - nbytes % 4].view(torch.int32)
    weights = torch.arange(words.numel(), device=raw.device, dtype=torch.int32) % 65521 + 1
    tail = raw[nbytes - nbytes % 4 :].to(torch.int64)
    sums = torch.stack([words.sum(), (words * weights).sum(), (words ^ weights).sum(), tail.sum()])
    return sums.cpu().numpy().tobytes()


def constant(t: torch.Tensor) -> bool:
    """Every element holds one value (bit for bit)."""
    if t.numel() <= 1:
        return True
    flat = t.detach().reshape(-1)
    first = flat[:1]
    if flat.is_floating_point() and torch.isnan(first).all():
        return bool(torch.isnan(flat).all())
    return bool((flat == first).all())


def same_values(t: torch.Tensor, source: torch.Tensor) -> bool:
    """`t` holds exactly the values of `source` (converted to t's dtype), in any order: a layout copy."""
    if t.numel() != source.numel() or t.numel() == 0 or t.is_complex() or source.is_complex():
        return False
    if t.device != source.device:
        return False
    try:
        mine = torch.sort(t.detach().reshape(-1).to(torch.float64)).values
        theirs = torch.sort(source.detach().to(t.dtype).reshape(-1).to(torch.float64)).values
    except (RuntimeError, TypeError):
        return False
    return bool(torch.allclose(mine, theirs, rtol=0.0, atol=0.0, equal_nan=True))


def _countable(t: torch.Tensor) -> torch.Tensor:
    """The values of `t` as float64, every NaN (a poison fill) as one value: unique() keeps each NaN apart."""
    return torch.nan_to_num(t.detach().reshape(-1).to(torch.float64), nan=1.2345e308, posinf=math.inf, neginf=-math.inf)


def padded_copy(t: torch.Tensor, source: torch.Tensor) -> bool:
    """`t` holds the values of `source` (in any order) and, in its other elements, one constant: a copy of an input
    into a buffer filled first (zeros padded to a tile or an alignment, then `copy_` into a slice)."""
    extra = t.numel() - source.numel()
    if extra <= 0 or source.numel() == 0 or t.device != source.device or t.is_complex() or source.is_complex():
        return False
    try:
        mine, mine_counts = torch.unique(_countable(t), return_counts=True)
        theirs, their_counts = torch.unique(_countable(source.detach().to(t.dtype)), return_counts=True)
    except (RuntimeError, TypeError):
        return False
    where = torch.searchsorted(mine, theirs).clamp(max=mine.numel() - 1)
    if not bool((mine[where] == theirs).all()) or bool((mine_counts[where] < their_counts).any()):
        return False  # a value of the source is missing
    left = mine_counts.clone()
    left[where] -= their_counts
    return int((left > 0).sum()) == 1 and int(left.sum()) == extra  # what is left over is one constant


@dataclass
class Provenance:
    """Fingerprints of every storage the learner's kernels saw during one graded call, and their origins."""

    inputs: dict[str, torch.Tensor]
    own_files: set[str]
    seen: dict[tuple[str, int, int], dict[bytes, str]] = field(default_factory=dict)  # digest -> origin
    latest: dict[tuple[str, int, int], bytes] = field(default_factory=dict)
    sources: list[torch.Tensor] = field(default_factory=list)  # tensors whose copies count as clean
    kernel_written: list[torch.Tensor] = field(default_factory=list)  # arguments a launch changed
    host_reads: list[str] = field(default_factory=list)
    _at_return: list[bytes] = field(default_factory=list)

    def __post_init__(self) -> None:
        for t in self.inputs.values():
            if isinstance(t, torch.Tensor):
                self.note(t, INPUT)
                self.sources.append(t)

    def note(self, t: torch.Tensor, origin: str) -> None:
        key, digest = storage_key(t), fingerprint(t)
        self.seen.setdefault(key, {}).setdefault(digest, origin)
        self.latest[key] = digest

    def origin(self, t: torch.Tensor) -> str:
        """Where the values now under `t` came from: by its storage's fingerprint, failing that by its values."""
        key, digest = storage_key(t), fingerprint(t)
        known = self.seen.get(key, {})
        if digest in known:
            found = known[digest]
        elif constant(t):
            found = FILL
        elif any(same_values(t, source) or padded_copy(t, source) for source in self.sources):
            found = COPY
        else:
            found = HOST
        self.seen.setdefault(key, {}).setdefault(digest, found)
        self.latest[key] = digest
        return found

    def before_launch(self, kernel: str, own: bool, args: list[tuple[str, torch.Tensor]]) -> None:
        if not own:
            return
        for name, t in args:
            if self.origin(t) == HOST and len(self.host_reads) < MAX_HOST_READS:
                self.host_reads.append(f"argument {name} of {kernel}: {describe(t)}")

    def after_launch(self, own: bool, args: list[tuple[str, torch.Tensor]]) -> None:
        for _, t in args:
            key, digest = storage_key(t), fingerprint(t)
            if digest != self.latest.get(key):
                self.seen.setdefault(key, {})[digest] = KERNEL if own else HOST
                self.latest[key] = digest
                if own:
                    self.sources.append(t)
                    self.kernel_written.append(t)

    def output_origin(self, t: Any) -> str:
        """kernel, a layout or dtype copy of what a kernel wrote, or how else the returned tensor's values came
        about (unseen: no kernel of yours had it)."""
        if not isinstance(t, torch.Tensor) or t.device.type not in ("cpu", "cuda"):
            return ""  # no values to trace (a meta tensor): output_form says what is wrong with it
        key, digest = storage_key(t), fingerprint(t)
        known = self.seen.get(key, {})
        if known.get(digest) == KERNEL:
            return KERNEL
        if any(
            same_values(t, source) or padded_copy(source, t)  # a padded result cut back to its shape, too
            for source in self.kernel_written
            if storage_key(source) != key
        ):
            return KERNEL_COPY  # e.g. an accumulator of atomics converted with .to(float16)
        if not known:
            return UNSEEN
        if digest in known and self.latest.get(key) == digest:
            return known[digest]  # input, fill or copy: no kernel of yours wrote it
        return HOST  # changed since the last launch that had it

    def output_origins(self, outputs: list[Any]) -> list[str]:
        """The origin of each returned output ("" for what is not a tensor), fingerprints kept for a second look."""
        self._at_return = [fingerprint(t) if isinstance(t, torch.Tensor) else b"" for t in outputs]
        return [self.output_origin(t) for t in outputs]

    def unchanged_since(self, outputs: list[Any], origins: list[str]) -> list[str]:
        """The origins again, with `host` for an output that changed since `output_origins` looked (another
        thread writing while the outputs were saved)."""
        now = [fingerprint(t) if isinstance(t, torch.Tensor) else b"" for t in outputs]
        return [origin if a == b else HOST for origin, a, b in zip(origins, self._at_return, now, strict=True)]


def describe(t: torch.Tensor) -> str:
    return f"a {tuple(t.shape)} {str(t.dtype).replace('torch.', '')} tensor"


def tensor_arguments(kernel: Any, args: tuple, kwargs: dict) -> list[tuple[str, torch.Tensor]]:
    """(name, tensor) for every tensor a launch passes, tensor descriptors' tensors included."""
    names = list(getattr(kernel, "arg_names", []))
    found = []
    for position, value in enumerate(args):
        name = names[position] if position < len(names) else f"#{position}"
        found.append((name, value))
    found += list(kwargs.items())
    tensors = []
    for name, value in found:
        value = getattr(value, "base", value) if not isinstance(value, torch.Tensor) else value
        if isinstance(value, torch.Tensor) and value.device.type in ("cpu", "cuda") and value.numel():
            tensors.append((name, value))
    return tensors


def _kernel_classes() -> list[type]:
    """Triton's kernel classes, and the autotuner: an autotuned launch is fingerprinted once, around all its
    benchmark runs and restores, as the one launch the learner made."""
    from triton.runtime.autotuner import Autotuner

    from checks.engine.child.launches import _kernel_classes as classes

    return [Autotuner, *classes()]


def _function(kernel: Any) -> Any:
    """The Python function under a kernel object (through autotuner and heuristics wrappers)."""
    fn = kernel
    for _ in range(8):
        if hasattr(fn, "__code__"):
            return fn
        fn = getattr(fn, "fn", None)
    return None


def _source_file(kernel: Any) -> str:
    code = getattr(_function(kernel), "__code__", None)
    return str(Path(code.co_filename).resolve()) if code is not None else "?"


@contextlib.contextmanager
def watch_provenance(provenance: Provenance) -> Iterator[Provenance]:
    """Fingerprint every launch's tensor arguments around the launch, and every allocation as it is made.

    Enter it inside `watch_launches` and `guard_allocations` (it wraps their wrappers): it sees the launch
    as the learner made it and the guarded tensor the learner got back.
    """
    runs = {cls: cls.run for cls in _kernel_classes()}
    inside = threading.local()  # depth of launches in progress on this thread: only the outermost is watched

    def wrap_run(original: Callable) -> Callable:
        @functools.wraps(original)
        def run(self, *args, **kwargs):
            depth = getattr(inside, "depth", 0)
            if depth:
                return original(self, *args, **kwargs)  # a run inside an autotuned launch
            tensors = tensor_arguments(self, args, kwargs)
            own = _source_file(self) in provenance.own_files
            name = getattr(_function(self), "__name__", "?")
            provenance.before_launch(name, own, tensors)
            inside.depth = depth + 1
            try:
                result = original(self, *args, **kwargs)
            finally:
                inside.depth = depth
            provenance.after_launch(own, tensors)
            return result

        return run

    def wrap_allocator(original: Callable) -> Callable:
        @functools.wraps(original)
        def allocate(*args, **kwargs):
            t = original(*args, **kwargs)
            if isinstance(t, torch.Tensor) and t.device.type in ("cpu", "cuda") and t.numel():
                provenance.note(t, FILL)
            return t

        return allocate

    patched: list[tuple[Any, str, Callable]] = [(cls, "run", original) for cls, original in runs.items()]
    patched += [(torch, name, getattr(torch, name)) for name in _ALLOCATORS]
    patched += [(torch.Tensor, name, getattr(torch.Tensor, name)) for name in _TENSOR_ALLOCATORS]
    try:
        for owner, name, original in patched:
            setattr(owner, name, wrap_run(original) if name == "run" else wrap_allocator(original))
        yield provenance
    finally:
        for owner, name, original in patched:
            setattr(owner, name, original)
