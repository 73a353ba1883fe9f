"""Patch Triton's interpreter so that an `AccessRecorder` sees every load, store and launch.

`record_access(arena, inputs)` patches the interpreter's memory paths for the duration of a block:

    InterpreterBuilder.create_masked_load / create_masked_store   (tl.load / tl.store; tensor
        descriptors end there too, through create_descriptor_load/store, in Triton 3.6 and 3.9;
        so do block pointers, through create_tensor_pointer_load/store, in 3.6 (3.9 removed them);
        3.9's tl.atomic_load/store call them as well)
    InterpreterBuilder.create_atomic_rmw / create_atomic_cas     (tl.atomic_*)
    InterpreterBuilder.set_grid_dim                               (the grid of each launch)
    GridExecutor.__call__                                         (the kernel's name and tensor arguments)

and gives the `checks.engine.access.recorder.AccessRecorder` that collects what they see.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable, Iterator
from typing import Any

import torch

from checks.engine.access.log import ATOMIC, LOAD, STORE
from checks.engine.access.recorder import DEFAULT_MAX_RECORDS, AccessRecorder
from checks.engine.patching import Replacement, replaced

Hook = Callable[[AccessRecorder, Callable], Callable]  # (recorder, original) -> its replacement


# Triton 3.6: (ptrs, mask, other, cache_modifier, eviction_policy, is_volatile);
# Triton 3.9: (ptrs, mask, other, cache_policy, is_volatile). Only the leading ones matter here.
def _load(recorder: AccessRecorder, original: Callable) -> Callable:
    def create_masked_load(self, ptrs, mask, *args, **kwargs):
        recorder.access(LOAD, self, ptrs, mask)
        result = original(self, ptrs, mask, *args, **kwargs)
        recorder.follow(LOAD, self, ptrs, mask, result)  # the values loaded: where they came from
        return result

    return create_masked_load


def _store(recorder: AccessRecorder, original: Callable) -> Callable:
    def create_masked_store(self, ptrs, value, mask, *args, **kwargs):
        recorder.access(STORE, self, ptrs, mask)
        recorder.follow(STORE, self, ptrs, mask, value)  # the values stored: a copy of a loaded element, or new
        return original(self, ptrs, value, mask, *args, **kwargs)

    return create_masked_store


def _rmw(recorder: AccessRecorder, original: Callable) -> Callable:
    def create_atomic_rmw(self, op, ptr, val, mask, *args, **kwargs):
        recorder.access(ATOMIC, self, ptr, mask)
        recorder.follow(ATOMIC, self, ptr, mask, None)
        return original(self, op, ptr, val, mask, *args, **kwargs)

    return create_atomic_rmw


def _cas(recorder: AccessRecorder, original: Callable) -> Callable:
    def create_atomic_cas(self, ptr, *args, **kwargs):
        recorder.access(ATOMIC, self, ptr, None)
        recorder.follow(ATOMIC, self, ptr, None, None)
        return original(self, ptr, *args, **kwargs)

    return create_atomic_cas


def _grid(recorder: AccessRecorder, original: Callable) -> Callable:
    def set_grid_dim(self, nx, ny, nz):
        recorder.set_grid((nx, ny, nz))
        return original(self, nx, ny, nz)

    return set_grid_dim


def _arguments(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """A launch's arguments by the kernel's parameter names (positional ones unnamed if it has none)."""
    try:
        names = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        names = []
    return {**dict(zip(names, args, strict=False)), **kwargs}


def _launch(recorder: AccessRecorder, original: Callable) -> Callable:
    def call(self, *args, **kwargs):
        fn = getattr(self, "fn", None)
        recorder.begin_launch(getattr(fn, "__name__", "?"), _arguments(fn, args, kwargs))
        return original(self, *args, **kwargs)

    return call


_BUILDER_HOOKS: tuple[tuple[str, Hook], ...] = (
    ("create_masked_load", _load),
    ("create_masked_store", _store),
    ("create_atomic_rmw", _rmw),
    ("create_atomic_cas", _cas),
    ("set_grid_dim", _grid),
)


def _wrapped(owner: object, name: str, hook: Hook, recorder: AccessRecorder) -> Replacement | None:
    """`owner.name` replaced by the hook's wrapper of it; None when it has no such attribute (another Triton)."""
    original = getattr(owner, name, None)
    return None if original is None else (owner, name, functools.wraps(original)(hook(recorder, original)))


def _interpreter_hooks(recorder: AccessRecorder) -> list[Replacement]:
    from triton.runtime import interpreter

    hooks = [_wrapped(interpreter.InterpreterBuilder, name, hook, recorder) for name, hook in _BUILDER_HOOKS]
    hooks.append(_wrapped(interpreter.GridExecutor, "__call__", _launch, recorder))
    return [replacement for replacement in hooks if replacement is not None]


def _adopt_and_name(arena: Any, recorder: AccessRecorder) -> Callable[[torch.Tensor, bool], torch.Tensor]:
    """`arena.adopt`, telling the recorder how the buffer it guards is seen (its shape and strides)."""
    adopt = arena.adopt

    def adopt_and_name(template: torch.Tensor, poison: bool) -> torch.Tensor:
        view = adopt(template, poison)
        recorder.sync_arena(view)
        return view

    return adopt_and_name


@contextlib.contextmanager
def record_access(
    arena: Any = None, inputs: dict[str, Any] | None = None, max_records: int = DEFAULT_MAX_RECORDS
) -> Iterator[AccessRecorder]:
    """Record every load and store of Triton's interpreter inside the block.

    `arena` (a `checks.memory.Arena`) names its buffers: inputs by their name in `inputs`, the
    submission's allocations by their label (the replay adopts a plan's allocations into the arena,
    `checks.engine.replay.perform`, so that they are guarded, and seen with their shape).
    """
    recorder = AccessRecorder(max_records)
    hooks = _interpreter_hooks(recorder)
    if arena is not None:
        recorder.add_arena(arena, inputs)
        hooks.append((arena, "adopt", _adopt_and_name(arena, recorder)))
    try:
        with replaced(hooks):
            yield recorder
    finally:
        recorder.flush()
