"""See the torch operations the learner's own code runs while it is graded.

The contract lets a learner's wrapper allocate, reshape, copy layouts and launch; it must compute
nothing with torch. `watch_torch` enters a `TorchDispatchMode`, which sees every aten operation
(on CPU and CUDA tensors alike, and those the autograd engine runs) after torch's composite
functions have been taken apart: `torch.nn.functional.softmax(x)` arrives as `aten._softmax`,
`x @ y` as `aten.mm`, `x.contiguous()` as `aten.clone`.

Deny by default: an operation whose overload packet is not in `ALLOWED` is recorded, with the
learner's line, when the innermost Python frame outside the torch package is in one of the
learner's own files. The grader's allocations (checks.engine.memory's guard bands, poison fills, copies),
Triton's interpreter and autotuner run from their own files and are never blamed.

Autograd: the engine's ops are recorded like any others (on a CPU the engine runs on the calling
thread, so the learner's `.backward()` line is found; on a CUDA device thread there is no Python
frame, and such an op is recorded as run by the autograd engine). Building a graph is recorded
too: an allowed op (a view, a copy) on a tensor that requires grad counts as autograd use.

`torch.compile`: while a dispatch mode is active, Dynamo runs compiled functions eagerly, so their
ops arrive here one by one and are recorded like any others.
"""

from __future__ import annotations

import contextlib
import linecache
import os
import sys
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from checks.engine.observations import AUTOGRAD, TorchOp

# The aten overload packets a wrapper may run, by name and why; a name this torch lacks is skipped.
# Everything else (arithmetic, reductions, matmul, softmax, indexing with tensors, cat/pad, random
# numbers, in-place updates such as add_ or masked_fill_) is recorded when the learner's code runs it.
ALLOWED_NAMES: dict[str, list[str]] = {
    "allocation": """empty empty_like empty_strided empty_permuted new_empty new_empty_strided zeros zeros_like
        ones ones_like full full_like new_zeros new_ones new_full scalar_tensor lift_fresh resize_""".split(),
    "fill of a fresh tensor": "fill_ zero_".split(),
    "view or reshape": """view _unsafe_view _reshape_alias reshape as_strided as_strided_ alias detach detach_ t t_
        transpose transpose_ permute expand unsqueeze unsqueeze_ squeeze squeeze_ slice select narrow split
        split_with_sizes unbind chunk unflatten view_as_real view_as_complex unfold diagonal movedim""".split(),
    "layout or dtype copy": "clone _to_copy copy_ copy contiguous lift_fresh_copy".split(),
    "index generation": "arange".split(),
    "metadata": """_local_scalar_dense is_nonzero sym_size sym_stride sym_numel sym_storage_offset is_contiguous
        is_same_size is_pinned _pin_memory pin_memory record_stream""".split(),
}
# Copies whose reads a caller may want to treat as reads of their source: packet name -> where the
# source is ("args0": the first argument, result is the output; "args1": copy_(dst, src), result dst).
_COPIES = {"clone": 0, "_to_copy": 0, "contiguous": 0, "lift_fresh_copy": 0, "copy_": 1, "copy": 1}

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_THIS_FILE = __file__
_PRINTING = os.path.join(_TORCH_DIR, "_tensor_str.py")
ENGINE = "the autograd engine, running a backward pass your code started"
MAX_RECORDED = 100  # distinct (op, line) pairs kept; a loop of x * 2 is one entry


def _packets(names: Collection[str]) -> set[Any]:
    found = set()
    for name in names:
        packet = getattr(torch.ops.aten, name, None)
        if packet is not None:
            found.add(packet)
    return found


ALLOWED = _packets([name for group in ALLOWED_NAMES.values() for name in group])
COPY_PACKETS = {packet: _COPIES[str(packet).removeprefix("aten.")] for packet in _packets(_COPIES)}


def _graph_task() -> int:
    """The autograd engine's current graph task, or -1 outside a backward pass."""
    current = getattr(torch._C, "_current_graph_task_id", None)
    return current() if current is not None else -1


def _requires_grad(args: tuple, kwargs: dict) -> bool:
    for value in (*args, *kwargs.values()):
        if isinstance(value, torch.Tensor) and value.requires_grad:
            return True
        if isinstance(value, (list, tuple)):
            if any(isinstance(v, torch.Tensor) and v.requires_grad for v in value):
                return True
    return False


@dataclass
class TorchWatch:
    """What `watch_torch` saw: the learner's torch operations, first occurrence of each (op, line)."""

    own_files: dict[str, str]  # resolved path -> name shown to the learner
    on_copy: Callable[[torch.Tensor, torch.Tensor], None] | None = None
    ops: list[TorchOp] = field(default_factory=list)
    _seen: set[tuple[str, str]] = field(default_factory=set)
    _resolved: dict[str, str | None] = field(default_factory=dict)

    def shown_name(self, filename: str) -> str | None:
        """The learner-facing name of a code object's file, or None when it is not the learner's."""
        try:
            return self._resolved[filename]
        except KeyError:
            try:
                path = str(Path(filename).resolve())
            except (OSError, ValueError):
                path = filename
            shown = self.own_files.get(path)
            self._resolved[filename] = shown
            return shown

    def culprit(self) -> tuple[str, int, str] | None | bool:
        """(shown file, line, path) of the learner's frame that ran the current op.

        None when the op is not the learner's; False when no Python frame outside torch ran it
        (the autograd engine on a device thread).
        """
        frame = sys._getframe(1)
        while frame is not None:
            filename = frame.f_code.co_filename
            if filename == _PRINTING:
                return None  # printing a tensor (its repr computes, but answers nothing)
            if not filename.startswith(_TORCH_DIR) and filename != _THIS_FILE:
                break
            frame = frame.f_back
        if frame is None:
            return False
        shown = self.shown_name(frame.f_code.co_filename)
        if shown is None:
            return None
        return shown, frame.f_lineno, frame.f_code.co_filename

    def record(self, op: str, where: str) -> None:
        key = (op, where)
        if key in self._seen or len(self.ops) >= MAX_RECORDED:
            return
        self._seen.add(key)
        self.ops.append(TorchOp(op, where))


def _where(culprit: tuple[str, int, str]) -> str:
    shown, line, path = culprit
    source = linecache.getline(path, line).strip()
    return f"{shown}, line {line}: {source}" if source else f"{shown}, line {line}"


class _Mode(TorchDispatchMode):
    def __init__(self, watch: TorchWatch) -> None:
        super().__init__()
        self.watch = watch

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # Recent torch wraps a mode's __torch_dispatch__ in torch._dynamo.disable, which imports
        # Dynamo (seconds) at the first op and adds ~20 us to every op. Nothing compiles in here:
        # under an active dispatch mode Dynamo runs compiled functions eagerly.
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # torch's signature
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        packet = func.overloadpacket
        watch = self.watch
        if packet in ALLOWED:
            if _graph_task() == -1 and not _requires_grad(args, kwargs):
                # allocation, view, copy, fill, metadata: fine; a copy is reported to on_copy
                source_at = COPY_PACKETS.get(packet)
                if source_at is None or watch.on_copy is None or len(args) <= source_at:
                    return out
                result = args[0] if source_at == 1 else out
                if isinstance(args[source_at], torch.Tensor) and isinstance(result, torch.Tensor):
                    if isinstance(watch.culprit(), tuple):
                        watch.on_copy(args[source_at], result)
                return out
            name = f"{packet}{AUTOGRAD}"
        else:
            name = str(packet)
        culprit = watch.culprit()
        if isinstance(culprit, tuple):
            watch.record(name, _where(culprit))
        elif culprit is False and _graph_task() != -1:
            watch.record(name, ENGINE)
        return out


@contextlib.contextmanager
def watch_torch(
    own_files: Collection[str] | Mapping[str, str],
    on_copy: Callable[[torch.Tensor, torch.Tensor], None] | None = None,
) -> Iterator[TorchWatch]:
    """Record the torch operations the learner's own files run inside the block.

    `own_files`: the learner's files (any spelling of their paths; a mapping gives the name to show
    for each, a set shows the file's base name). `on_copy(source, result)` is called for each layout
    or dtype copy the learner's code makes (`.contiguous()`, `.to`, `.clone()`, `copy_`), so that
    reads of the copy can be counted as reads of its source.
    """
    if isinstance(own_files, Mapping):
        names = {str(Path(path).resolve()): shown for path, shown in own_files.items()}
    else:
        names = {str(Path(path).resolve()): Path(path).name for path in own_files}
    watch = TorchWatch(names, on_copy)
    with _Mode(watch):
        yield watch
