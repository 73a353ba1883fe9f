"""A tensor without storage that answers the host function as a real one does: the data at the largest sizes.

The largest sizes' data (`checks.puzzles.largest`) is made on torch's meta device, and a host function that asked
`x.is_meta` or `x.device` would know it is probed, and could launch another kernel there than on a real call.
`Unbacked` wraps such a meta tensor and reports the grading device (cpu in the interpreter, cuda:0 on a GPU): its
`device`, `is_meta`, `is_cuda`, `get_device()`, dtype, shape, strides and storage offset are a real tensor's, and
`data_ptr()` an address in the range where the host's allocations lie, its views' offsets from it as a real tensor's
(nothing of the grader reads it: the recorder tells storages apart by the meta tensor's, `backing`). Every torch
operation on it runs on its meta tensor (a real tensor beside it, a block table say, taken to the meta device for its
shape alone) and gives Unbacked results on the same device; an operation on real tensors alone stays real, with its
values.

Its values are not there: an operation that hands them to the host (`.item()`, `bool(x)`, `float(x)`, `.tolist()`,
`.numpy()`, `torch.nonzero`, a copy to another device) raises `ValuesRead`, remembered even where the host code
catches it (`Unbacked.reads`): the recording reports it, and offsets_fit fails. What host code can still tell: the
type (`type(x)` is this class, though `isinstance(x, torch.Tensor)` holds; its attribute `inner`), that
`x.untyped_storage()` and `x.storage()` raise, `repr(x)` (no values), and how long torch takes.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from torch.utils._pytree import tree_leaves, tree_map

META = torch.device("meta")
FAKE_BASE = 0x7F00_0000_0000  # where the addresses of unbacked storages start: a user-space address of x86-64
FAKE_SPAN = 1 << 36  # room between two storages (64 GiB): past the largest tensor of the largest sizes
# aten operations that give the host a tensor's values (their results are Python numbers, or shapes that follow from
# the values)
VALUE_OPS = frozenset(
    {"_local_scalar_dense", "is_nonzero", "equal", "nonzero", "masked_select", "unique", "_unique2", "allclose"}
)

READS = {  # how the learner's code names each of them
    "_local_scalar_dense": "`.item()` (or `float()`, `int()` of a tensor)",
    "is_nonzero": "`bool()` of a tensor (an `if` on one)",
    "_to_copy": "a copy off the data's own memory (`.cpu()` on a GPU, `.to(...)`)",  # no "device": rules.overflow
    "tolist": "`.tolist()`",
    "numpy": "`.numpy()`",
}


class ValuesRead(RuntimeError):
    """The host function asked for the values of a tensor of the largest sizes, which has none."""


class Unbacked(torch.Tensor):
    """A tensor of the largest sizes without storage, on the grading device as far as its host code can tell."""

    inner: torch.Tensor  # the meta tensor: the storage (views share it), shape, strides and offset
    addresses: ClassVar[dict[int, int]] = {}  # meta storage -> its fake address
    reads: ClassVar[list[ValuesRead]] = []  # what each operation that asked for values raised, caught or not

    @staticmethod
    def __new__(cls, inner: torch.Tensor, device: torch.device) -> Unbacked:
        made = torch.Tensor._make_wrapper_subclass(
            cls,
            inner.shape,
            strides=inner.stride(),
            storage_offset=inner.storage_offset(),
            dtype=inner.dtype,
            device=device,
            requires_grad=inner.requires_grad,
        )
        made.inner = inner
        return made

    __torch_function__ = torch._C._disabled_torch_function_impl

    def data_ptr(self) -> int:
        """The address of its first element: its storage's fake one plus its offset."""
        key = self.inner.untyped_storage()._cdata
        base = Unbacked.addresses.setdefault(key, FAKE_BASE + len(Unbacked.addresses) * FAKE_SPAN)
        return base + self.inner.data_ptr()  # a meta tensor's data_ptr() is its offset in bytes

    def tolist(self) -> Any:
        raise Unbacked.read("tolist")

    def numpy(self, *args: Any, **kwargs: Any) -> Any:
        raise Unbacked.read("numpy")

    def __format__(self, spec: str) -> str:
        return format(self.item(), spec) if self.dim() == 0 else repr(self)

    @classmethod
    def read(cls, name: str) -> ValuesRead:
        """The error of an operation that asks for the values, remembered: the host code may catch it."""
        read = ValuesRead(
            f"{READS.get(name, f'`{name}`')} asked for the values of the data on the host, which a plan never depends "
            "on (only on the data's shapes, strides and dtypes)"
        )
        cls.reads.append(read)
        return read

    def __repr__(self) -> str:
        return f"tensor(..., size={tuple(self.shape)}, dtype={self.dtype}, device='{self.device}')"

    @classmethod
    def __torch_dispatch__(cls, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        devices = [a.device for a in tree_leaves((args, kwargs)) if isinstance(a, Unbacked)]
        device = devices[0] if devices else torch.device("cpu")
        name = func.overloadpacket.__name__
        moved = (kwargs or {}).get("device")
        elsewhere = name == "_to_copy" and moved is not None and torch.device(moved) not in (device, META)
        if name in VALUE_OPS or elsewhere:  # a value handed to Python, or the data copied to another device (the host)
            raise cls.read(name)
        given = {id(a.inner): a for a in tree_leaves((args, kwargs)) if isinstance(a, Unbacked)}
        out = func(*tree_map(_on_meta, args), **tree_map(_on_meta, kwargs or {}))

        def wrapped(o: Any) -> Any:
            if not isinstance(o, torch.Tensor) or not o.is_meta:
                return o
            written = given.get(id(o))  # an in-place op gives back the tensor it wrote
            return Unbacked(o, device) if written is None else written

        return tree_map(wrapped, out)


def _on_meta(a: Any) -> Any:
    """An argument as the meta tensor runs it: an Unbacked tensor's meta tensor; a real tensor's shape on meta."""
    if isinstance(a, Unbacked):
        return a.inner
    if isinstance(a, torch.Tensor):
        return a.to(META)
    return a


def backing(t: torch.Tensor) -> torch.Tensor:
    """The tensor whose storage `t` views: its meta tensor for an Unbacked one, itself otherwise."""
    return t.inner if isinstance(t, Unbacked) else t


def unbacked(inputs: dict[str, Any], device: str) -> dict[str, Any]:
    """The inputs with each meta tensor wrapped as an Unbacked one on `device` (views of one storage stay views of
    one storage); the values read so far forgotten."""
    Unbacked.reads.clear()
    Unbacked.addresses.clear()
    real = torch.empty(0, device=device).device  # as a real tensor names it: cuda:0, not cuda
    return {name: Unbacked(t, real) if _meta(t) else t for name, t in inputs.items()}


def _meta(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and not isinstance(t, Unbacked) and t.is_meta
