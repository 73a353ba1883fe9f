"""Races between the programs of one launch, seen although Triton's interpreter runs them one at a time.

On a GPU the programs of a launch run at once, in no order. Two kinds of plain (non-atomic) stores then give a
result that depends on which program gets there first, though the interpreter, running the programs one after the
other, computes the right values:

- a race: two programs store one element, and one of them loaded it before its store (a read-modify-write such as
  `dq = tl.load(p); tl.store(p, dq + part)` across programs): on a GPU both may load the old value, and one
  program's update is lost;
- a write collision: two programs store different values to one element: on a GPU either may be the one kept.

`RaceWatch` follows, for each launch and each element of every tensor that is not an input, the first program that
stored it (plain) and the last that loaded it, and notes the first race and the first collision of each store line
in the launch (`found`: {"kind": "race" | "collision", "launch", "kernel", "function", "line", "region",
"index", "programs": [first, second]}). Atomics are the way to share an element (`tl.atomic_add`), and are not
judged here; nor is a launch that takes a lock (`tl.atomic_cas`), whose programs may order their stores themselves.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

FOUND_LIMIT = 8  # notes kept per launch: the report names the first


class RaceWatch:
    """The plain stores and loads of each launch, per element, for the recorder (`AccessRecorder`) that owns it."""

    def __init__(self, recorder: Any, where: Callable[[], tuple[str, int]]) -> None:
        """`recorder`: a RegionMap with `launches` (`checks.engine.access.recorder.AccessRecorder`); `where()`: the
        (function, line) of the kernel's source the interpreter runs now."""
        self.recorder = recorder
        self.where = where
        self.found: list[dict[str, Any]] = []
        self._state: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}  # region -> owner, loader, rmw
        self._locked = False
        self._noted: set[tuple[str, str, int]] = set()

    def new_launch(self) -> None:
        self._state.clear()
        self._locked = False
        self._noted.clear()

    def lock_taken(self) -> None:
        """The launch compares-and-swaps (a lock, a flag): its programs may order their stores themselves."""
        self._locked = True

    def _arrays(self, r: int) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        region = self.recorder.regions[r]
        if region.role == "input":  # a store into an input is `inputs_unchanged`'s
            return None
        if r not in self._state:
            size = region.size
            self._state[r] = (np.full(size, -1, np.int64), np.full(size, -1, np.int64), np.zeros(size, bool))
        return self._state[r]

    def loaded(self, pid: int, r: int, offsets: np.ndarray) -> None:
        """Program `pid` loaded these elements (offsets in region r's body) with a plain load."""
        arrays = self._arrays(r)
        if arrays is not None:
            arrays[1][offsets] = pid

    def stored(self, builder: Any, ptrs: Any, value: Any, mask: Any) -> None:
        """A plain store of the program the interpreter runs now, before it is made (the memory still holds what the
        earlier programs stored)."""
        shape = np.shape(ptrs.data)
        addresses = np.asarray(ptrs.data).reshape(-1)
        lanes = np.ones(addresses.shape, bool) if mask is None else np.broadcast_to(mask.data, shape).reshape(-1)
        if not lanes.any():
            return
        on = addresses[lanes].astype(np.int64)
        r = self.recorder.region_at(int(on.min()))
        if r < 0 or int(on.max()) >= self.recorder.regions[r].high:
            return  # a store over several regions, or none: not judged here
        arrays = self._arrays(r)
        if arrays is None:
            return
        owner, loader, rmw = arrays
        region = self.recorder.regions[r]
        offsets = (on - region.body) // region.element_size
        inside = (offsets >= 0) & (offsets < region.size)
        if not inside.any():
            return
        gx, gy, _ = builder.grid_dim
        x, y, z = builder.grid_idx
        pid = x + gx * (y + gy * z)
        offsets = offsets[inside]
        first = owner[offsets]
        fresh = offsets[first < 0]
        owner[fresh] = pid
        rmw[fresh] = loader[fresh] == pid
        other = (first >= 0) & (first != pid)
        if self._locked or not other.any():
            return
        race = other & ((loader[offsets] == pid) | rmw[offsets])
        differs = other & ~race
        if differs.any():
            values = np.broadcast_to(value.data, shape).reshape(-1)[lanes][inside]
            differs &= ~_same_bits(values, _memory(on[inside], values.dtype))
        for kind, hits in (("race", race), ("collision", differs)):
            if hits.any():
                k = int(np.argmax(hits))
                self._note(kind, r, int(offsets[k]), [int(first[k]), pid])

    def _note(self, kind: str, r: int, offset: int, programs: list[int]) -> None:
        function, line = self.where()
        if (kind, function, line) in self._noted or len(self._noted) >= FOUND_LIMIT:
            return
        self._noted.add((kind, function, line))
        launches = self.recorder.launches
        self.found.append({
            "kind": kind, "launch": len(launches) - 1, "kernel": launches[-1]["kernel"] if launches else "?",
            "function": function, "line": line, "region": r, "index": self._index(r, offset), "programs": programs,
        })  # fmt: skip

    def _index(self, r: int, offset: int) -> list[int]:
        """The element's indices in its tensor's own index space (its offset in the body, if it lies outside)."""
        region = self.recorder.regions[r]
        rel = offset - region.offset
        index = [0] * len(region.shape)
        for d, stride in self.recorder._orders[r]:
            index[d], rel = divmod(rel, stride)
        return index if rel == 0 and all(0 <= i < n for i, n in zip(index, region.shape, strict=True)) else [offset]


def _memory(addresses: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """What memory holds at these addresses, as elements of `dtype` (Triton's interpreter's own load)."""
    from triton.runtime.interpreter import _interpreter

    n = addresses.size
    return _interpreter.load(addresses.astype(np.uint64), np.ones(n, bool), np.zeros(n, dtype), dtype)


def _same_bits(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    width = f"u{a.dtype.itemsize}"
    return np.ascontiguousarray(a).view(width) == np.ascontiguousarray(b).view(width)
