"""Where each element of memory came from, followed while the kernels run: the copies of the inputs, and who wrote.

`checks.engine.access.recorder.AccessRecorder` keeps one `Provenance` and tells it of every load, store and atomic
(with the values loaded or stored) and of every copy the plan makes. For each region (`checks.engine.access.regions`)
it keeps, per element of the region's body:

- its origin: the element of an input whose value it holds unchanged, or -1. An input's elements are their own
  origin. A copy the plan makes (a view's `copy_`, `clone`, `contiguous`, a dtype cast, a broadcasting `copy_`)
  gives each element of the result the origin of the element it was copied from. A kernel's store gives a stored
  lane the origin of a lane that the same program loaded with the same value (the same bits, of the same dtype; or,
  where the stored block's handle carries `LOADED_AS`, the loaded value cast to the store's float type, or its bits
  in an integer of the same width) at
  the same place in its block: the same position in the block's lanes (a copy, reshaped or not, masked or not, of
  a block gathered from anywhere), or the transposed position (`tl.trans`). Where several loads held that value
  there, the latest one's; and a load counts only as the source of at least `COPY_LANES` lanes of one store. Any
  other store, and any atomic, leaves the element without origin.
- its writer: the program (launch, pid) that last stored it, or, through a copy, the program that stored the element
  it holds (a kernel's copy of an input's element: the program that stored it; the plan's: none); -1 for none.

and, for the judge:

- the loads of each input's elements through copies (a load of an element of another region whose origin it is),
  which the recorder tallies in the input's own index space (`AccessRecorder._tally_via`);
- `edges`: (writer, reader) pairs of programs: the reader loaded an element the writer computed (data that is not a
  copy of an input), so the reader's work builds on the writer's.

Why by value and place: a stored value that merely equals one of the many values a program loaded (a float16 result
often does) is no copy, and matching values alone would take it for one; a value stored at the place in the block it
was loaded at is what a copy is. What it cannot see (the limits, said in docs/grading.md): a kernel that shuffles a
block's lanes (`tl.gather`, `tl.join` of two blocks, a broadcast) before storing them, or that changes a value on the
way (x * 2, a cast that rounds; a cast that keeps the value is followed through `LOADED_AS`, as are changes of
shape, bitcasts, selects, and arithmetic, matrix products, reductions and scans whose result is its operand lane for
lane: x + 0.0, a product with the identity, a sum over an axis of size 1), or that stores fewer than `COPY_LANES`
lanes of one load at a time, makes data that is judged as the kernel's own work, not as a copy; a load of integers
is no copy's source unless what it loads holds an input's float bits (indices are not data); a result that equals a
loaded value at its place by chance (the softmax of a single key is that key's value) is taken for a copy of it.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

COPY_LANES = 8  # a load is the source of a store's lanes where it is of at least this many
# A value block's handle in the interpreter (`TensorHandle.attr`) carries the numpy dtype of the load whose values it
# holds unchanged, through these operations of the interpreter's builder: casts, bitcasts, changes of shape, selects
LOADED_AS = "checks.loaded_as"
LINEAGE_OPERATIONS = (
    "create_fp_ext", "create_fp_trunc", "create_fp_to_fp", "cast_impl", "create_bitcast", "create_reshape",
    "create_trans", "create_expand_dims", "create_broadcast", "create_select",
)  # fmt: skip
# and these, where the result is an operand's value lane for lane (x + 0.0, x * 1.0, a maximum with itself, a matrix
# product with the identity); reductions and scans too (a sum over an axis of size 1), `patches._reduction_lineage`
IDENTITY_OPERATIONS = (
    "create_fadd", "create_fsub", "create_fmul", "create_fdiv", "create_maximumf", "create_minimumf",
    "create_maxnumf", "create_minnumf", "create_dot",
)  # fmt: skip
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


class Provenance:
    """Origins and writers of every region's elements, and the loads through copies (see the module's text)."""

    def __init__(self) -> None:
        self.origin: list[np.ndarray | None] = []  # [region] -> int64 origin ids, -1 none; None: none at all
        self.writer: list[np.ndarray | None] = []  # [region] -> int64 program ids, -1 none
        self.is_input: list[bool] = []
        self.edges: set[tuple[int, int]] = set()
        self._program = -1
        # this program's loads, in levels of sorted tables (place keys, source ids, load serials), each at least twice
        # the size of the next: a load merges into the last levels, so a long program sorts each lane O(log n) times
        self._levels: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.serial = 0  # loads seen

    def add_region(self, role: str) -> None:
        self.origin.append(None)
        self.writer.append(None)
        self.is_input.append(role == "input")

    # -- programs ------------------------------------------------------------------------------------------------
    def enter(self, program: int) -> None:
        """The program the interpreter runs now; a new one starts with nothing loaded."""
        if program != self._program:
            self._program = program
            self._levels = []

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
    def load(self, region: int, offsets: np.ndarray, places: np.ndarray | None = None) -> np.ndarray:
        """A load of these elements (places: `place_keys` of their values and lanes, None for integers); their
        origins."""
        ids = self.origins(region, offsets)
        writers = self.writers(region, offsets)
        derived = writers[(writers >= 0) & (ids < 0)]  # data a program computed, not a copy of an input
        if derived.size:
            for w in np.unique(derived):
                if int(w) != self._program:
                    self.edges.add((int(w), self._program))
        if places is not None:
            sources = np.where(ids >= 0, ids, -2 - element_id(region, offsets))  # -2 - id: an element of no input
            self._add_level((places, sources, np.full(places.shape, self.serial, dtype=np.int64)))
        return ids

    def store(self, region: int, size: int, offsets: np.ndarray, places: list[np.ndarray] | None) -> None:
        """A store of these elements (places: `place_keys` of the stored values at their lanes, and at the transposed
        lanes; None for integers)."""
        sources = self._match(places) if places is not None else np.full(offsets.shape, -1, dtype=np.int64)
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
        self._set(self.origin, region, size, offsets, np.where(sources >= 0, sources, -1))
        self._set(self.writer, region, size, offsets, writer)

    def atomic(self, region: int, size: int, offsets: np.ndarray) -> None:
        """An atomic read-modify-write: the element is the program's own result, built on what it held."""
        self.load(region, offsets)
        self._set(self.origin, region, size, offsets, np.full(offsets.shape, -1, dtype=np.int64))
        self._set(self.writer, region, size, offsets, np.full(offsets.shape, self._program, dtype=np.int64))

    def _add_level(self, level: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
        """A load's lanes into the levels, merging the last levels while they are no more than twice its size."""
        while self._levels and len(self._levels[-1][0]) <= 2 * len(level[0]):
            older = self._levels.pop()
            level = tuple(np.concatenate([new, old]) for new, old in zip(level, older, strict=True))  # type: ignore
        keys, sources, serials = level
        order = np.argsort(keys, kind="stable")  # equal keys: the newer load first, as it came first
        self._levels.append((keys[order], sources[order], serials[order]))

    def _match(self, places: list[np.ndarray]) -> np.ndarray:
        """For each stored lane, the source of a lane of this program's loads with the same value at the same place
        (the first of `places` that has one; of the latest load, where several do): an input's element id, or -2 -
        the id of an element of no input; -1 where none. A load counts as the source of this store's lanes only
        where it is of at least COPY_LANES of them: a float16 result equals a loaded value at its place now and then
        by chance, a copy at every lane; and the max of a row of one element is that element, which is no copy."""
        found = np.full(places[0].shape, -1, dtype=np.int64)
        source_load = np.full(found.shape, -1, dtype=np.int64)
        for keys in places:
            best = np.full(found.shape, -1, dtype=np.int64)  # the latest load that held this value at this place
            for table, sources, serials in self._levels:
                at = np.minimum(np.searchsorted(table, keys), len(table) - 1)
                hit = (source_load < 0) & (table[at] == keys) & (keys != -1) & (serials[at] > best)
                found[hit] = sources[at[hit]]
                best[hit] = serials[at[hit]]
            source_load = np.where(best >= 0, best, source_load)
        loads, counts = np.unique(source_load[source_load >= 0], return_counts=True)
        few = [int(s) for s, n in zip(loads, counts, strict=True) if n < COPY_LANES]
        if few:
            found[np.isin(source_load, few)] = -1
        return found

    # -- the plan's copies ---------------------------------------------------------------------------------------
    def copy(self, src_region: int, src_offsets: np.ndarray, dst_region: int, dst_size: int,
             dst_offsets: np.ndarray) -> None:  # fmt: skip
        """`dst.copy_(src)` element by element (offsets in each region's body, broadcast already)."""
        origins, writers = self.origins(src_region, src_offsets), self.writers(src_region, src_offsets)
        self._set(self.origin, dst_region, dst_size, dst_offsets, origins)
        self._set(self.writer, dst_region, dst_size, dst_offsets, writers)


@functools.lru_cache(maxsize=256)
def _places(shape: tuple[int, ...], transposed: bool) -> np.ndarray:
    """Each lane's position among a block's lanes (with `transposed`, of a 2-D block, in the block's transpose)."""
    if transposed:
        rows, cols = shape
        return np.arange(cols, dtype=np.int64)[None, :] * rows + np.arange(rows, dtype=np.int64)[:, None]
    return np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)


def handle_attributes(handle: Any) -> dict | None:
    """A value handle's `attr` dict (where `LOADED_AS` is kept); None for anything else (read from its fields: a
    `tl.tuple` argument raises on any attribute it lacks)."""
    attr = getattr(handle, "__dict__", {}).get("attr")
    return attr if isinstance(attr, dict) else None


def carry_lineage(result: Any, operands: Any, where_unchanged: bool) -> None:
    """Mark value handle `result` as holding values loaded as the dtype the first of `operands` (value handles) that
    carries one was loaded as (`LOADED_AS`); with `where_unchanged`, only an operand whose values `result` holds lane
    for lane (`same_values`)."""
    attr = handle_attributes(result)
    if attr is None:
        return
    for operand in operands:
        loaded_as = (handle_attributes(operand) or {}).get(LOADED_AS)
        if loaded_as is not None and (not where_unchanged or same_values(result.data, operand.data)):
            attr[LOADED_AS] = loaded_as
            return


def same_values(result: Any, operand: Any) -> bool:
    """Whether an operation's result holds its operand's values lane for lane: the operand broadcast to the result's
    shape (or, of as many lanes, reshaped: a reduction over an axis of size 1), a narrower float widened exactly to
    the result's type (a matrix product's float32 sum of float16 operands)."""
    result, operand = np.asarray(result), np.asarray(operand)
    if operand.dtype != result.dtype:
        if not (operand.dtype.kind == result.dtype.kind == "f" and operand.dtype.itemsize < result.dtype.itemsize):
            return False
        operand = operand.astype(result.dtype)
    if operand.size == result.size and operand.shape != result.shape:
        operand = operand.reshape(result.shape)
    try:
        operand = np.broadcast_to(operand, result.shape)
    except ValueError:
        return False
    return bool(np.array_equal(result, operand, equal_nan=result.dtype.kind == "f"))


def cast_back(values: Any, mask: np.ndarray, loaded_as: Any) -> list[np.ndarray] | None:
    """`place_keys` (and the transposed ones) of a stored block whose handle says its values were loaded as another
    float dtype (`LOADED_AS`): each lane as that dtype, where a float converts back exactly (a lane the cast rounded is
    no copy, key -1), or its bits, where an integer of the same width holds them (`x.to(tl.int16, bitcast=True)`);
    None where there is nothing to follow this way."""
    data = np.asarray(values)
    source = np.dtype(loaded_as) if loaded_as is not None else None
    if source is None or source == data.dtype or source.kind != "f":
        return None
    if data.dtype.kind in "iu" and data.dtype.itemsize == source.itemsize:  # a bitcast: the loaded bits, kept
        back, exact = data.view(source), np.ones(data.shape, dtype=bool)
    elif data.dtype.kind == "f":
        with np.errstate(over="ignore", invalid="ignore"):
            back = data.astype(source)
            exact = (back.astype(data.dtype) == data) | (np.isnan(back) & np.isnan(data))
    else:
        return None
    keys = [place_keys(back, mask), place_keys(back, mask, transposed=True)]
    if keys[0] is None:
        return None
    inexact = ~exact[mask]
    for k in keys:
        k[inexact] = -1
    return keys  # type: ignore[return-value]


def place_keys(values: Any, mask: np.ndarray, transposed: bool = False) -> np.ndarray | None:
    """For each active lane of a block of values, a key of its value (bits and dtype) and its place in the block (its
    position among the block's lanes; with `transposed`, of a 2-D block, the position the lane has in the block's
    transpose, and -1 for other blocks). None for integer or unknown data."""
    data = np.asarray(values)
    if data.dtype.kind != "f" or data.dtype.itemsize not in (2, 4, 8) or data.shape != mask.shape:
        return None
    size = data.dtype.itemsize
    bits = data.view(f"u{size}").astype(np.int64)
    if size < 8:
        bits |= np.int64(size << 56)
    if transposed:
        if data.ndim != 2:
            return np.full(int(mask.sum()), -1, dtype=np.int64)
        rows, cols = data.shape
        place = np.arange(cols, dtype=np.int64)[None, :] * rows + np.arange(rows, dtype=np.int64)[:, None]
    else:
        place = np.arange(data.size, dtype=np.int64).reshape(data.shape)
    with np.errstate(over="ignore"):
        keys = bits * np.int64(1_000_003) + place  # a hash of (value, place): equal where both are
    return keys[mask]
