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

It also makes the interpreter's loads read what a GPU's may (`_poison_masked_lanes`): the lanes a load's mask leaves
out, where the load gives no `other=`, are undefined on a GPU (whatever the registers held), where the interpreter
reads 0. Here they read poison: NaN in a float, `INT_POISON` in an integer (a page number or offset read there sends
an address far outside every tensor, as garbage would), `True` in a boolean. A block pointer's load with
`boundary_check` and no `padding_option` is the same load on a GPU (Triton rewrites it into a masked load with no
`other`), so it reads poison too; a tensor descriptor's load (the hardware's copy fills the lanes past the tensor
with zeros, or NaN with `padding="nan"`) and a block pointer's with a `padding_option` keep the values they name.
The recorder notes where each such load left lanes out (`AccessRecorder.note_masked_poison`), so that a report can
name it when the poison reaches an output.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch

from checks.engine.access.log import ATOMIC, LOAD, STORE
from checks.engine.access.provenance import IDENTITY_OPERATIONS, LINEAGE_OPERATIONS, carry_lineage
from checks.engine.access.recorder import DEFAULT_MAX_RECORDS, AccessRecorder
from checks.engine.patching import Replacement, replaced

Hook = Callable[[AccessRecorder, Callable], Callable]  # (recorder, original) -> its replacement


# Triton 3.6: (ptrs, mask, other, cache_modifier, eviction_policy, is_volatile);
# Triton 3.9: (ptrs, mask, other, cache_policy, is_volatile). Only the leading ones matter here.
def _load(recorder: AccessRecorder, original: Callable) -> Callable:
    def create_masked_load(self, ptrs, mask, *args, **kwargs):
        recorder.access(LOAD, self, ptrs, mask)
        result = original(self, ptrs, mask, *args, **kwargs)
        recorder.follow(LOAD, self, ptrs, mask, result)  # the values loaded: where they came from, and as what
        return result

    return create_masked_load


def _carrying_lineage(original: Callable, where_unchanged: bool) -> Callable:
    """`original` (an operation of the interpreter's builder), its result carrying the dtype its values were loaded as
    (`LOADED_AS`) where an operand carries one; with `where_unchanged`, only where the result is that operand's value
    lane for lane."""

    def operation(self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        carry_lineage(result, args, where_unchanged)
        return result

    return operation


def _lineage_kept(recorder: AccessRecorder, original: Callable) -> Callable:
    """A cast, a change of shape or a select passes loaded values on unchanged: its result carries the dtype they were
    loaded as, so that a store of a loaded value cast to another float type is followed as a copy
    (`checks.engine.access.provenance.cast_back`)."""
    return _carrying_lineage(original, where_unchanged=False)


def _lineage_kept_where_unchanged(recorder: AccessRecorder, original: Callable) -> Callable:
    """An arithmetic passes a loaded value on where its result is that value lane for lane (x + 0.0, x * 1.0)."""
    return _carrying_lineage(original, where_unchanged=True)


INT_POISON = 0x5A5A5A5A5A5A5A5A  # an integer lane a mask left out, truncated to the load's width (0x5A5A5A5A in int32)


# the interpreter keeps these floats in unsigned integers: a NaN's bits
_STORED_NAN = {"bf16": 0x7FC0, "fp8e5": 0x7F, "fp8e5b16": 0x80, "fp8e4nv": 0x7F, "fp8e4b8": 0x80, "fp8e4b15": 0x7F}


def poison_like(ptrs: Any, dtype_tt: Any, dtype_np: Any) -> np.ndarray | None:
    """What the lanes a mask leaves out read on a GPU, here: NaN in a float, INT_POISON in an integer (its low bytes),
    True in a boolean; None for a load of pointers (left as the interpreter gives them)."""
    kind = np.dtype(dtype_np).kind
    if dtype_tt.is_ptr():
        return None
    if kind == "f":
        return np.full(np.shape(ptrs.data), np.nan, dtype=dtype_np)
    if str(dtype_tt) in _STORED_NAN:
        return np.full(np.shape(ptrs.data), _STORED_NAN[str(dtype_tt)], dtype=dtype_np)
    if kind == "b":
        return np.ones(np.shape(ptrs.data), dtype=dtype_np)
    if kind in "iu":
        bits = np.dtype(dtype_np).itemsize * 8
        value = np.array(INT_POISON & ((1 << bits) - 1), dtype=np.uint64).astype(f"u{bits // 8}")
        return np.full(np.shape(ptrs.data), value.view(dtype_np), dtype=dtype_np)
    return None


def _poisoned_other(ptrs: Any, mask: Any, other: Any) -> Any:
    """The `other` a masked load without one reads in the lanes its mask leaves out (poison); None where the load
    names its own, leaves no lane out, or loads pointers."""
    if other is not None or mask is None or np.all(mask.data):
        return None
    from triton.runtime import interpreter

    dtype_tt = ptrs.get_element_ty()
    poison = poison_like(ptrs, dtype_tt, interpreter._get_np_dtype(dtype_tt))
    return None if poison is None else interpreter.TensorHandle(poison, dtype_tt)


def _poison_masked_lanes(recorder: AccessRecorder, original: Callable) -> Callable:
    """`create_masked_load` giving poison where the mask leaves lanes out and the load names no `other`."""

    def create_masked_load(self, ptrs, mask, other, *args, **kwargs):
        poison = _poisoned_other(ptrs, mask, other)
        if poison is not None:
            other = poison
            recorder.note_masked_poison(self, int(np.size(mask.data) - np.count_nonzero(mask.data)))
        return original(self, ptrs, mask, other, *args, **kwargs)

    return create_masked_load


@contextlib.contextmanager
def programs_reversed() -> Iterator[None]:
    """Inside the block, the interpreter runs the programs of every launch last to first: the program it runs at each
    step is the grid's mirror image of the one it would run (`tl.program_id` and the access log see that one). A GPU
    may run them in this order as well as in the other."""
    from triton.runtime import interpreter

    original = interpreter.InterpreterBuilder.set_grid_idx

    def set_grid_idx(self, x, y, z):
        gx, gy, gz = self.grid_dim
        return original(self, gx - 1 - x, gy - 1 - y, gz - 1 - z)

    with replaced([(interpreter.InterpreterBuilder, "set_grid_idx", set_grid_idx)]):
        yield


@contextlib.contextmanager
def masked_lanes_poisoned(spared: tuple[str, int]) -> Iterator[None]:
    """Inside the block, without an access log, the interpreter's masked loads without `other=` read poison as under
    `record_access`, all but the one at `spared` (function, line of the kernel's source), which reads 0 there: the
    run that tells whether that load's poison reached an output."""
    from triton.runtime import interpreter

    from checks.engine.access.recorder import kernel_line

    original = interpreter.InterpreterBuilder.create_masked_load

    def create_masked_load(self, ptrs, mask, other, *args, **kwargs):
        poison = _poisoned_other(ptrs, mask, other)
        if poison is not None and kernel_line() != spared:
            other = poison
        return original(self, ptrs, mask, other, *args, **kwargs)

    with replaced([(interpreter.InterpreterBuilder, "create_masked_load", create_masked_load)]):
        yield


def _loads_as_on_a_gpu(recorder: AccessRecorder, original: Callable) -> Callable:
    """The load the access log records (`_load`), reading poison where a GPU's would be undefined."""
    return _load(recorder, _poison_masked_lanes(recorder, original))


def _store(recorder: AccessRecorder, original: Callable) -> Callable:
    def create_masked_store(self, ptrs, value, mask, *args, **kwargs):
        recorder.access(STORE, self, ptrs, mask)
        recorder.follow(STORE, self, ptrs, mask, value)  # the values stored: a copy of a loaded element, or new
        return original(self, ptrs, value, mask, *args, **kwargs)

    return create_masked_store


def _races_watched(recorder: AccessRecorder, original: Callable) -> Callable:
    """`create_masked_store`, shown to the recorder's race watch before it is made (`checks.engine.access.races`)."""

    def create_masked_store(self, ptrs, value, mask, *args, **kwargs):
        recorder.races.stored(self, ptrs, value, mask)
        return original(self, ptrs, value, mask, *args, **kwargs)

    return create_masked_store


def _stores_watched(recorder: AccessRecorder, original: Callable) -> Callable:
    """The store the access log records (`_store`), watched for races between the programs of a launch."""
    return _store(recorder, _races_watched(recorder, original))


def _cas_ordered(recorder: AccessRecorder, original: Callable) -> Callable:
    """`create_atomic_cas`, shown to the race watch: it reads its element in order and orders the programs that make
    atomics on it (`checks.engine.access.races`)."""

    def create_atomic_cas(self, ptr, cmp, val, sem, *args, **kwargs):
        recorder.races.atomic(self, ptr, None, sem)
        return original(self, ptr, cmp, val, sem, *args, **kwargs)

    return create_atomic_cas


def _cas_watched(recorder: AccessRecorder, original: Callable) -> Callable:
    return _cas(recorder, _cas_ordered(recorder, original))


def _poison_noted(recorder: AccessRecorder, original: Callable) -> Callable:
    """`create_atomic_rmw`, telling the recorder first where it adds into memory no kernel wrote."""

    def create_atomic_rmw(self, op, ptr, val, mask, *args, **kwargs):
        recorder.note_atomic_on_poison(ptr, mask)
        return original(self, op, ptr, val, mask, *args, **kwargs)

    return create_atomic_rmw


def _is_exchange(op: Any) -> bool:
    """Whether an atomic's operation overwrites its element (`tl.atomic_xchg`) rather than accumulates into it."""
    return str(getattr(op, "name", op)).upper().rsplit(".", 1)[-1] == "XCHG"


def _rmw_ordered(recorder: AccessRecorder, original: Callable) -> Callable:
    """`create_atomic_rmw`, shown to the race watch: an exchange as a store first (two programs exchanging different
    values into one element collide as two stores do), then as an atomic (`checks.engine.access.races`)."""

    def create_atomic_rmw(self, op, ptr, val, mask, sem, *args, **kwargs):
        if _is_exchange(op):
            recorder.races.stored(self, ptr, val, mask)
        recorder.races.atomic(self, ptr, mask, sem)
        return original(self, op, ptr, val, mask, sem, *args, **kwargs)

    return create_atomic_rmw


def _rmw_watched(recorder: AccessRecorder, original: Callable) -> Callable:
    return _rmw(recorder, _poison_noted(recorder, _rmw_ordered(recorder, original)))


def _rmw(recorder: AccessRecorder, original: Callable) -> Callable:
    def create_atomic_rmw(self, op, ptr, val, mask, *args, **kwargs):
        recorder.access(ATOMIC, self, ptr, mask)
        if _is_exchange(op):  # it stores its value: followed as a store is, a copy where it is one
            recorder.follow(STORE, self, ptr, mask, val)
        else:
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
    ("create_masked_load", _loads_as_on_a_gpu),
    ("create_masked_store", _stores_watched),
    ("create_atomic_rmw", _rmw_watched),
    ("create_atomic_cas", _cas_watched),
    ("set_grid_dim", _grid),
    *((name, _lineage_kept) for name in LINEAGE_OPERATIONS),
    *((name, _lineage_kept_where_unchanged) for name in IDENTITY_OPERATIONS),
)


def _wrapped(owner: object, name: str, hook: Hook, recorder: AccessRecorder) -> Replacement | None:
    """`owner.name` replaced by the hook's wrapper of it; None when it has no such attribute (another Triton)."""
    original = getattr(owner, name, None)
    return None if original is None else (owner, name, functools.wraps(original)(hook(recorder, original)))


def _reduction_lineage(recorder: AccessRecorder, original: Callable) -> Callable:
    """A reduction or scan of the interpreter's (`ReduceScanOpInterface.apply`, which reduces in numpy, past the
    builder) passes on the dtype an input was loaded as where a result holds that input's values lane for lane (a sum
    over an axis of size 1)."""

    def apply(self, input):
        result = original(self, input)
        inputs = input if isinstance(input, tuple) else (input,)
        for out in result if isinstance(result, tuple) else (result,):
            carry_lineage(getattr(out, "handle", None), [getattr(arg, "handle", None) for arg in inputs], True)
        return result

    return apply


def _interpreter_hooks(recorder: AccessRecorder) -> list[Replacement]:
    from triton.runtime import interpreter

    hooks = [_wrapped(interpreter.InterpreterBuilder, name, hook, recorder) for name, hook in _BUILDER_HOOKS]
    hooks.append(_wrapped(interpreter.GridExecutor, "__call__", _launch, recorder))
    hooks.append(_wrapped(interpreter.ReduceScanOpInterface, "apply", _reduction_lineage, recorder))
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
