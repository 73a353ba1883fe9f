"""Where each element of memory came from, followed while the kernels run: the copies of the inputs, and who wrote.

`checks.engine.access.recorder.AccessRecorder` keeps one `Provenance` and tells it of every load, store and atomic
(with the values loaded or stored) and of every copy the plan makes. For each region (`checks.engine.access.regions`)
it keeps, per element of the region's body:

- its origin: the element of an input whose value it holds unchanged, or -1. An input's elements are their own
  origin. A copy the plan makes (a view's `copy_`, `clone`, `contiguous`, a dtype cast, a broadcasting `copy_`)
  gives each element of the result the origin of the element it was copied from. A kernel's store gives a stored
  element the origin of an element that the same program loaded with a bit-identical value (compared as float64,
  so a cast to a wider float is still a copy), unless that loaded element was the max or min of its slice along
  the load's last axis, of at least `REDUCED_SLICE` active lanes, and the store holds no other lane of that slice:
  then the stored value is taken for what a reduction (a row's max) picked, not a copy. Any other store, and any
  atomic, leaves the element without origin.
- its writer: the program (launch, pid) that last stored it, or, through a copy, the program that stored the element
  it holds; -1 for none. A copy of an input's elements has no writer (the input's values are no program's work).

and, for the judge:

- `via`: for each input region, how many times each element was loaded through a copy (a load of an element of
  another region whose origin it is), and the records of those loads, in the input's own index space;
- `edges`: (writer, reader) pairs of programs: the reader loaded an element the writer computed (data that is
  not a copy of an input), so the reader's work builds on the writer's.

What it cannot see (the limits, said in docs/grading.md): a value a kernel computes that happens to equal a loaded
one is taken for a copy of it (a reduction along another axis than the last, say a column's max, is); the max and
min of a slice stored alone, each by a store of its own, are taken for a reduction's results (at most two lanes of
each slice of `REDUCED_SLICE` or more); integer loads are not followed (indices, not data); a kernel that changes a
value on the way (x * 2, or a cast to a narrower type) makes new data, which is judged as the kernel's own work,
not as a copy.
"""

from __future__ import annotations

from typing import Any

import numpy as np

REDUCED_SLICE = 16  # a loaded lane that is the max or min of a slice of at least this many active lanes: a reduction
_SHIFT = 40  # a global element id: region << _SHIFT | offset in the region's body
_MASK = (1 << _SHIFT) - 1


def element_id(region: int | np.ndarray, offset: np.ndarray) -> np.ndarray:
    """The global ids of elements of a region (or of regions, lane by lane)."""
    return (np.asarray(region, dtype=np.int64) << _SHIFT) | offset.astype(np.int64)


def split_ids(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(region, offset) of each global id."""
    return ids >> _SHIFT, ids & _MASK


def program_id(launch: int, pid: int) -> int:
    """One int for a program: its launch and its launch-order pid."""
    return (launch << 32) | pid


def extremes(values: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Which lanes of a loaded block are the max or min of the active lanes of their slice along the last axis (the
    whole block, if it has one axis), where that slice holds at least REDUCED_SLICE active lanes: what `tl.max` or
    `tl.min` along that axis picks."""
    found = np.zeros(values.shape, dtype=bool)
    if values.ndim == 0 or values.shape[-1] < REDUCED_SLICE:
        return found
    v = values.astype(np.float64, copy=False)
    many = mask.sum(axis=-1, keepdims=True) >= REDUCED_SLICE
    if not many.any():
        return found
    with np.errstate(invalid="ignore"):
        top = np.where(mask, v, -np.inf).max(axis=-1, keepdims=True)
        bottom = np.where(mask, v, np.inf).min(axis=-1, keepdims=True)
        found |= ((v == top) | (v == bottom)) & many
    return found & mask


def slices(shape: tuple[int, ...], mask: np.ndarray, serial: int) -> np.ndarray:
    """An id, for each active lane of a load, of its slice along the last axis (unique to this load)."""
    width = shape[-1] if shape else 1
    flat = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    return (np.int64(serial) << 24) | (flat[mask] // max(1, width))


class Provenance:
    """Origins and writers of every region's elements, and the loads through copies (see the module's text)."""

    def __init__(self) -> None:
        self.origin: list[np.ndarray | None] = []  # [region] -> int64 origin ids, -1 none; None: none at all
        self.writer: list[np.ndarray | None] = []  # [region] -> int64 program ids, -1 none
        self.is_input: list[bool] = []
        self.edges: set[tuple[int, int]] = set()
        self._program = -1
        self._loaded: list[tuple[np.ndarray, ...]] = []  # (keys, source ids, reduced, slice ids) per load
        self._table: tuple[np.ndarray, ...] | None = None  # the same, sorted by key
        self.serial = 0  # loads seen: a load's slices are its own

    def add_region(self, role: str) -> None:
        self.origin.append(None)
        self.writer.append(None)
        self.is_input.append(role == "input")

    # -- programs ------------------------------------------------------------------------------------------------
    def enter(self, program: int) -> None:
        """The program the interpreter runs now; a new one starts with nothing loaded."""
        if program != self._program:
            self._program = program
            self._loaded = []
            self._table = None

    # -- what one element holds ----------------------------------------------------------------------------------
    def origins(self, region: int, offsets: np.ndarray) -> np.ndarray:
        """The origin of each of these elements of a region: an input's element is its own."""
        if self.is_input[region]:
            return element_id(region, offsets)
        known = self.origin[region]
        return known[offsets] if known is not None else np.full(offsets.shape, -1, dtype=np.int64)

    def writers(self, region: int, offsets: np.ndarray) -> np.ndarray:
        known = self.writer[region]
        return known[offsets] if known is not None else np.full(offsets.shape, -1, dtype=np.int64)

    def _set(self, table: list[np.ndarray | None], region: int, size: int, offsets: np.ndarray,
             values: np.ndarray) -> None:  # fmt: skip
        known = table[region]
        if known is None:
            if not (values >= 0).any():
                return
            known = table[region] = np.full(size, -1, dtype=np.int64)
        known[offsets] = values

    # -- accesses ------------------------------------------------------------------------------------------------
    def load(self, region: int, offsets: np.ndarray, keys: np.ndarray | None = None,
             reduced: np.ndarray | None = None, slice_ids: np.ndarray | None = None) -> np.ndarray:  # fmt: skip
        """A load of these elements (keys: their values as float64 bits, None for integers; reduced: which are the max
        or min of their slice, `extremes`; slice_ids: `slices`); their origins."""
        ids = self.origins(region, offsets)
        writers = self.writers(region, offsets)
        derived = writers[(writers >= 0) & (ids < 0)]  # data a program computed, not a copy of an input
        if derived.size:
            for w in np.unique(derived):
                if int(w) != self._program:
                    self.edges.add((int(w), self._program))
        if keys is not None and reduced is not None and slice_ids is not None:
            sources = np.where(ids >= 0, ids, -2 - element_id(region, offsets))  # -2 - id: an element of no input
            self._loaded.append((keys, sources, reduced, slice_ids))
            self._table = None
        return ids

    def store(self, region: int, size: int, offsets: np.ndarray, keys: np.ndarray | None) -> None:
        """A store of these elements (keys: the stored values as float64 bits, None for integers)."""
        sources = self._match(keys) if keys is not None else np.full(offsets.shape, -1, dtype=np.int64)
        writer = np.full(offsets.shape, self._program, dtype=np.int64)
        copied = sources <= -2  # a copy of an element that holds no input's value: it keeps that element's writer
        if copied.any():
            r, o = split_ids(-2 - sources[copied])
            kept = np.full(r.shape, -1, dtype=np.int64)
            for one in np.unique(r):
                known = self.writer[int(one)]
                if known is not None:
                    kept[r == one] = known[o[r == one]]
            writer[copied] = kept
        writer[sources >= 0] = -1  # a copy of an input is no program's work
        self._set(self.origin, region, size, offsets, np.where(sources >= 0, sources, -1))
        self._set(self.writer, region, size, offsets, writer)

    def atomic(self, region: int, size: int, offsets: np.ndarray) -> None:
        """An atomic read-modify-write: the element is the program's own result, built on what it held."""
        self.load(region, offsets)
        self._set(self.origin, region, size, offsets, np.full(offsets.shape, -1, dtype=np.int64))
        self._set(self.writer, region, size, offsets, np.full(offsets.shape, self._program, dtype=np.int64))

    def _match(self, keys: np.ndarray) -> np.ndarray:
        """For each stored value, the source of a loaded lane of this program with the same bits (an input's element
        id, or -2 - the id of an element of no input); -1 where none. A lane that was the max or min of its slice
        (`extremes`) is a reduction's result, unless this store holds another lane of that slice too (a copy of it)."""
        if not self._loaded:
            return np.full(keys.shape, -1, dtype=np.int64)
        if self._table is None:
            columns = [np.concatenate([one[c] for one in self._loaded]) for c in range(4)]
            order = np.argsort(columns[0], kind="stable")
            self._table = tuple(c[order] for c in columns)
        table, sources, reduced, slice_ids = self._table
        at = np.minimum(np.searchsorted(table, keys), len(table) - 1)
        hit = table[at] == keys
        picked = hit & reduced[at]
        if picked.any():
            found, counts = np.unique(slice_ids[at[hit]], return_counts=True)
            copied = np.isin(slice_ids[at], found[counts > 1])  # several lanes of one slice stored: a copy of it
            hit &= ~picked | copied
        return np.where(hit, sources[at], -1)

    # -- the plan's copies ---------------------------------------------------------------------------------------
    def copy(self, src_region: int, src_offsets: np.ndarray, dst_region: int, dst_size: int,
             dst_offsets: np.ndarray) -> None:  # fmt: skip
        """`dst.copy_(src)` element by element (offsets in each region's body, broadcast already)."""
        origins, writers = self.origins(src_region, src_offsets), self.writers(src_region, src_offsets)
        self._set(self.origin, dst_region, dst_size, dst_offsets, origins)
        self._set(self.writer, dst_region, dst_size, dst_offsets, writers)


def value_keys(values: Any, mask: np.ndarray | None) -> np.ndarray | None:
    """The active lanes' values as float64 bits (the keys a copy is matched by); None for integer or unknown data."""
    data = np.asarray(values)
    if data.dtype.kind != "f":
        return None
    if mask is not None:
        data = data[mask] if mask.shape == data.shape else data[np.broadcast_to(mask, data.shape)]
    return data.reshape(-1).astype(np.float64).view(np.int64)
