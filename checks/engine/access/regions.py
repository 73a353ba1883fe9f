"""Named regions of memory, for the access recorder: which tensor, and which element, an address is.

Memory is divided into named regions: the grader's guarded buffers (`checks.memory.Arena`:
every input, and every tensor the submission allocates while graded, each with guard bands),
tensors added with `RegionMap.add_region`, and any other tensor a kernel is launched with. A
region spans [low, high) in bytes; its body, where the tensor's elements are, is
[body, body + size * element_size), and an element's indices in the tensor's own index space
follow from its offset in the body with `index_order`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch


@dataclass
class Region:
    """A named piece of memory: [low, high) in bytes; the body [body, body + size * element_size)."""

    name: str  # the input's name ("q"), the output's name once known ("o"), or the label
    label: str  # how the grader names the buffer to the learner
    role: str  # "input", "allocated" (guarded, by the submission) or "scratch" (any other tensor)
    element_size: int
    size: int  # elements in the body (a view's span: gaps of a sliced view included)
    shape: list[int]  # the tensor's own index space
    strides: list[int]
    offset: int  # element offset of the tensor's [0, ..., 0] in the body
    numel: int
    low: int = 0
    body: int = 0
    high: int = 0
    storage: int = 0
    # of an output: the view the learner returned, when it is not the whole tensor ({"shape", "strides", "offset"})
    view: dict[str, Any] | None = None

    def serial(self) -> dict[str, Any]:
        data = asdict(self)
        for key in ("low", "body", "high", "storage"):
            data.pop(key)
        return data


def index_order(shape: list[int], strides: list[int]) -> list[tuple[int, int]]:
    """(dimension, stride) by decreasing stride, for turning an element offset into indices."""
    dims = [(d, s) for d, (n, s) in enumerate(zip(shape, strides, strict=True)) if n > 1 and s > 0]
    return sorted(dims, key=lambda ds: -ds[1])


class RegionMap:
    """The regions seen so far, sorted by address, and the arena whose new buffers become regions."""

    def __init__(self) -> None:
        self.regions: list[Region] = []
        self._orders: list[list[tuple[int, int]]] = []  # [region] -> index_order of its tensor
        self._lows = np.zeros(0, dtype=np.uint64)
        self._by_low: list[int] = []
        self._arena: Any = None
        self._arena_seen = 0
        self._inputs: dict[str, Any] = {}

    def _add(self, region: Region) -> int:
        self.regions.append(region)
        self._orders.append(index_order(region.shape, region.strides))
        order = sorted(range(len(self.regions)), key=lambda i: self.regions[i].low)
        self._by_low = order
        self._lows = np.array([self.regions[i].low for i in order], dtype=np.uint64)
        return len(self.regions) - 1

    def _covering(self, address: int) -> int:
        k = int(np.searchsorted(self._lows, np.uint64(address), side="right")) - 1
        if k < 0:
            return -1
        r = self._by_low[k]
        return r if address < self.regions[r].high else -1

    def region_at(self, address: int) -> int:
        """The region an address falls in (looking at the arena's new buffers first if none); -1 if none."""
        r = self._covering(address)
        if r < 0 and self._arena is not None:
            self.sync_arena()
            r = self._covering(address)
        return r

    def split(self, addresses: np.ndarray) -> tuple[list[tuple[int, np.ndarray]], int]:
        """(region, its addresses) for each region these addresses fall in, and how many fall in none."""
        k = np.searchsorted(self._lows, addresses.astype(np.uint64), side="right") - 1
        parts: list[tuple[int, np.ndarray]] = []
        unknown = 0
        for slot in np.unique(k):
            part = addresses[k == slot]
            r = self._by_low[slot] if slot >= 0 else -1
            if r < 0:
                unknown += int(part.size)
                continue
            inside = part < self.regions[r].high
            if not inside.all():
                unknown += int((~inside).sum())
                part = part[inside]
            if part.size:
                parts.append((r, part))
        return parts, unknown

    def add_region(self, name: str, tensor: torch.Tensor, role: str = "scratch", label: str | None = None) -> None:
        """Name a tensor's whole storage (for example a copy the learner made of an input)."""
        if not isinstance(tensor, torch.Tensor) or tensor.numel() == 0 or tensor.device.type != "cpu":
            return
        storage = tensor.untyped_storage()
        low = storage.data_ptr()
        if self._covering(low) >= 0:
            return
        es = tensor.element_size()
        self._add(Region(
            name=name, label=label or name, role=role, element_size=es, size=storage.nbytes() // es,
            shape=list(tensor.shape), strides=list(tensor.stride()), offset=tensor.storage_offset(),
            numel=tensor.numel(), low=low, body=low, high=low + storage.nbytes(), storage=low,
        ))  # fmt: skip

    def add_guarded(self, entry: Any, view: torch.Tensor | None = None, name: str | None = None) -> None:
        """One `checks.memory.Guarded` buffer; `view` is the tensor the learner sees in it."""
        buf = entry.buf
        es = buf.element_size()
        low = buf.data_ptr()
        if view is None:
            shape, strides, offset, numel = [entry.size], [1], 0, entry.size
        else:
            shape, strides = list(view.shape), list(view.stride())
            offset, numel = view.storage_offset() - entry.guard, view.numel()
        self._add(Region(
            name=name or entry.label, label=entry.label, role=entry.role, element_size=es, size=entry.size,
            shape=shape, strides=strides, offset=offset, numel=numel,
            low=low, body=low + entry.guard * es, high=low + buf.numel() * es, storage=low,
        ))  # fmt: skip

    def add_arena(self, arena: Any, inputs: dict[str, Any] | None = None) -> None:
        """Every buffer of the arena so far; inputs are named by the argument they are."""
        self._arena = arena
        self._inputs = dict(inputs or {})
        self.sync_arena()

    def sync_arena(self, view: torch.Tensor | None = None) -> None:
        """Add the arena's buffers not seen yet; `view`, when given, is how the newest one is seen."""
        if self._arena is None:
            return
        by_storage = {
            t.untyped_storage().data_ptr(): (name, t)
            for name, t in self._inputs.items()
            if isinstance(t, torch.Tensor) and t.numel()
        }
        while self._arena_seen < len(self._arena.buffers):
            entry = self._arena.buffers[self._arena_seen]
            self._arena_seen += 1
            name, seen = by_storage.get(entry.buf.untyped_storage().data_ptr(), (None, None))
            if seen is None and view is not None and view.untyped_storage().data_ptr() == entry.buf.data_ptr():
                seen = view
            self.add_guarded(entry, seen, name)

    def name_outputs(self, outputs: list[Any], names: list[str]) -> None:
        """Call after the call, in the grading process: name the buffers the learner returned."""
        for out, name in zip(outputs, names, strict=False):
            if isinstance(out, torch.Tensor) and out.numel():
                ptr = out.untyped_storage().data_ptr()
                for region in self.regions:
                    if region.storage == ptr and region.role != "input":
                        region.name = name
                        offset = (out.data_ptr() - region.body) // region.element_size
                        region.view = {"shape": list(out.shape), "strides": list(out.stride()), "offset": int(offset)}
