"""See every load and store a kernel makes in Triton's interpreter, and keep a bounded log of them.

`record_access(arena, inputs)` patches the interpreter's memory paths for the duration of a block:

    InterpreterBuilder.create_masked_load / create_masked_store   (tl.load / tl.store; tensor
        descriptors end there too, through create_descriptor_load/store, in Triton 3.6 and 3.9;
        so do block pointers, through create_tensor_pointer_load/store, in 3.6 (3.9 removed them);
        3.9's tl.atomic_load/store call them as well)
    InterpreterBuilder.create_atomic_rmw / create_atomic_cas     (tl.atomic_*)
    InterpreterBuilder.set_grid_dim                               (the grid of each launch)
    GridExecutor.__call__                                         (the kernel's name and tensor arguments)

Memory is divided into named regions: the grader's guarded buffers (`checks.engine.memory.Arena`: every
input, and every tensor the submission allocates while graded, each with guard bands), tensors
added with `AccessRecorder.add_region`, and any other tensor a kernel is launched with. For every
access the recorder keeps, aggregated so that memory stays bounded:

- per region and kind (load, store): how many times each element of its body was touched (a
  bincount, in storage order), the lanes touched in all, and the lanes that hit a guard band;
- per access, up to `max_records` of them: a record (kind, launch, program, region, lanes, and the
  box of indices it touched in the tensor's own index space: min and max along each dimension);
- the widest single load (lanes, masked-off ones included), and the loads that hit no region.

`AccessRecorder.log()` returns an `AccessLog`; `AccessLog.to_dict()` is plain data (str, int,
lists and torch tensors) that `torch.save` / `torch.load(weights_only=True)` round-trip, and
`AccessLog.from_dict` reads it back.

The interpreter runs programs one after the other on one thread, with the program's (x, y, z)
in `interpreter_builder.grid_idx` and the grid in `grid_dim`. A record's `pid` is the program's
place in a GPU's launch order, x + gx * (y + gy * z) (x fastest), not the interpreter's (x slowest).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch

LOAD, STORE, ATOMIC = 0, 1, 2
KINDS = ("load", "store", "atomic")
MAX_DIMS = 4
FIELDS: tuple[str, ...] = (
    "kind", "launch", "pid", "region", "lanes",
    *(f"lo{d}" for d in range(MAX_DIMS)), *(f"hi{d}" for d in range(MAX_DIMS)),
)  # fmt: skip
F = {name: i for i, name in enumerate(FIELDS)}
DEFAULT_MAX_RECORDS = 200_000
_FLUSH_AT = 1 << 21  # pending element offsets (all regions) before they are folded into the bincounts


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

    def serial(self) -> dict[str, Any]:
        data = asdict(self)
        for key in ("low", "body", "high", "storage"):
            data.pop(key)
        return data


def _index_order(shape: list[int], strides: list[int]) -> list[tuple[int, int]]:
    """(dimension, stride) by decreasing stride, for turning an element offset into indices."""
    dims = [(d, s) for d, (n, s) in enumerate(zip(shape, strides, strict=True)) if n > 1 and s > 0]
    return sorted(dims, key=lambda ds: -ds[1])


def box_of(offsets: np.ndarray, shape: list[int], strides: list[int], offset: int) -> tuple[list[int], list[int]]:
    """Min and max index along each dimension of the elements at these body offsets."""
    rel = offsets - offset
    lo = [0] * len(shape)
    hi = [0] * len(shape)
    for d, stride in _index_order(shape, strides):
        idx = rel // stride
        rel = rel - idx * stride
        lo[d], hi[d] = int(idx.min()), int(idx.max())
    return lo, hi


class AccessRecorder:
    """Collects accesses while `record_access` is active; `log()` gives what it saw."""

    def __init__(self, max_records: int = DEFAULT_MAX_RECORDS) -> None:
        self.regions: list[Region] = []
        self._orders: list[list[tuple[int, int]]] = []
        self._lows = np.zeros(0, dtype=np.uint64)
        self._by_low: list[int] = []
        self.max_records = max_records
        self._records = np.zeros((min(max_records, 4096), len(FIELDS)), dtype=np.int64)
        self.n_records = 0
        self.dropped = 0
        self.widest = 0
        self.unknown = [0, 0]  # lanes loaded / stored that hit no region
        self.launches: list[dict[str, Any]] = []
        self._pending: list[list[list[np.ndarray]]] = []  # [region][kind] -> offsets not yet counted
        self._pending_n = 0
        self._counts: list[list[np.ndarray | None]] = []  # [region][kind] -> bincount
        self.lanes: list[list[int]] = []  # [region][kind]
        self.outside: list[list[int]] = []  # [region][kind]: lanes in its guard bands
        self._arena: Any = None
        self._arena_seen = 0
        self._inputs: dict[str, Any] = {}

    # -- regions ---------------------------------------------------------------------------------
    def _add(self, region: Region) -> int:
        self.regions.append(region)
        self._orders.append(_index_order(region.shape, region.strides))
        self._pending.append([[], []])
        self._counts.append([None, None])
        self.lanes.append([0, 0])
        self.outside.append([0, 0])
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
        """One `checks.engine.memory.Guarded` buffer; `view` is the tensor the learner sees in it."""
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
        self._sync_arena()

    def _sync_arena(self, view: torch.Tensor | None = None) -> None:
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

    # -- launches ----------------------------------------------------------------------------------
    def begin_launch(self, kernel: str, arguments: dict[str, Any]) -> None:
        self.launches.append({"kernel": kernel, "grid": [1, 1, 1]})
        for name, value in arguments.items():
            if isinstance(value, torch.Tensor) and value.numel():
                self.add_region(f"{name} of {kernel}", value)

    def set_grid(self, grid: tuple[int, int, int]) -> None:
        if not self.launches:
            self.launches.append({"kernel": "?", "grid": [1, 1, 1]})
        self.launches[-1]["grid"] = [int(g) for g in grid]

    # -- accesses ----------------------------------------------------------------------------------
    def access(self, kind: int, builder: Any, ptrs: Any, mask: Any) -> None:
        addresses = np.asarray(ptrs.data)
        if kind == LOAD and addresses.size > self.widest:
            self.widest = int(addresses.size)
        if mask is None:
            on = addresses.reshape(-1)
        else:
            m = np.asarray(mask.data, dtype=bool)
            if m.shape != addresses.shape:
                m = np.broadcast_to(m, addresses.shape)
            on = addresses[m]
        if on.size == 0:
            return
        on = on.astype(np.int64, copy=False)
        lo, hi = int(on.min()), int(on.max())
        gx, gy, _ = builder.grid_dim
        x, y, z = builder.grid_idx
        pid = x + gx * (y + gy * z)
        r = self._covering(lo)
        if r < 0 and self._arena is not None:
            self._sync_arena()
            r = self._covering(lo)
        if r >= 0 and hi < self.regions[r].high:
            self._tally(kind, pid, r, on, lo, hi)
            return
        # several regions (or none) in one access: split it
        k = np.searchsorted(self._lows, on.astype(np.uint64), side="right") - 1
        for slot in np.unique(k):
            part = on[k == slot]
            r = self._by_low[slot] if slot >= 0 else -1
            if r >= 0:
                inside = part < self.regions[r].high
                if not inside.all():
                    self.unknown[min(kind, 1)] += int((~inside).sum())
                    part = part[inside]
                if part.size:
                    self._tally(kind, pid, r, part, int(part.min()), int(part.max()))
            else:
                self.unknown[min(kind, 1)] += int(part.size)

    def _tally(self, kind: int, pid: int, r: int, on: np.ndarray, lo: int, hi: int) -> None:
        region = self.regions[r]
        es = region.element_size
        offsets = (on - region.body) // es
        end = region.body + region.size * es
        if lo < region.body or hi >= end:
            inside = (offsets >= 0) & (offsets < region.size)
            self.outside[r][min(kind, 1)] += int(offsets.size - np.count_nonzero(inside))
            offsets = offsets[inside]
            if not offsets.size:
                return
        for k in (LOAD, STORE) if kind == ATOMIC else (kind,):
            self.lanes[r][k] += int(offsets.size)
            self._pending[r][k].append(offsets)
            self._pending_n += int(offsets.size)
        if self._pending_n > _FLUSH_AT:
            self.flush()
        self._record(kind, pid, r, offsets)

    def _record(self, kind: int, pid: int, r: int, offsets: np.ndarray) -> None:
        if self.n_records >= self.max_records:
            self.dropped += 1
            return
        if self.n_records == len(self._records):
            grown = np.zeros((min(self.max_records, 2 * len(self._records)), len(FIELDS)), dtype=np.int64)
            grown[: self.n_records] = self._records
            self._records = grown
        row = self._records[self.n_records]
        self.n_records += 1
        row[0], row[1], row[2], row[3], row[4] = kind, len(self.launches) - 1, pid, r, offsets.size
        region = self.regions[r]
        if len(region.shape) > MAX_DIMS:
            row[5], row[5 + MAX_DIMS] = int(offsets.min()), int(offsets.max())
            return
        rel = offsets - region.offset
        for d, stride in self._orders[r]:
            idx = rel // stride
            rel = rel - idx * stride
            row[5 + d], row[5 + MAX_DIMS + d] = idx.min(), idx.max()

    def flush(self) -> None:
        for r, region in enumerate(self.regions):
            for k in (LOAD, STORE):
                pending = self._pending[r][k]
                if not pending:
                    continue
                counts = np.bincount(np.concatenate(pending), minlength=region.size).astype(np.int32)
                previous = self._counts[r][k]
                self._counts[r][k] = counts if previous is None else previous + counts
                self._pending[r][k] = []
        self._pending_n = 0

    def log(self) -> AccessLog:
        self.flush()
        counts = [
            [torch.from_numpy(c) if c is not None else torch.zeros(0, dtype=torch.int32) for c in per]
            for per in self._counts
        ]
        return AccessLog(
            regions=[r.serial() for r in self.regions],
            reads=[c[LOAD] for c in counts],
            writes=[c[STORE] for c in counts],
            loaded=[lanes[LOAD] for lanes in self.lanes],
            stored=[lanes[STORE] for lanes in self.lanes],
            outside_loads=[o[LOAD] for o in self.outside],
            outside_stores=[o[STORE] for o in self.outside],
            unknown_loads=self.unknown[LOAD],
            unknown_stores=self.unknown[STORE],
            widest=self.widest,
            launches=[dict(launch) for launch in self.launches],
            records=torch.from_numpy(self._records[: self.n_records].copy()),
            dropped=self.dropped,
        )


@dataclass
class AccessLog:
    """What the kernels touched, as plain data. Region i's counts are `reads[i]` / `writes[i]`."""

    regions: list[dict[str, Any]] = field(default_factory=list)
    reads: list[torch.Tensor] = field(default_factory=list)  # int32 (size,) per region, storage order
    writes: list[torch.Tensor] = field(default_factory=list)
    loaded: list[int] = field(default_factory=list)  # lanes loaded per region (body only)
    stored: list[int] = field(default_factory=list)
    outside_loads: list[int] = field(default_factory=list)  # lanes that hit the region's guard bands
    outside_stores: list[int] = field(default_factory=list)
    unknown_loads: int = 0
    unknown_stores: int = 0
    widest: int = 0
    launches: list[dict[str, Any]] = field(default_factory=list)  # {"kernel": str, "grid": [gx, gy, gz]}
    records: torch.Tensor = field(default_factory=lambda: torch.zeros((0, len(FIELDS)), dtype=torch.int64))
    dropped: int = 0  # accesses past max_records (counted in the totals, without a record)
    fields: list[str] = field(default_factory=lambda: list(FIELDS))

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": 1,
            "regions": [dict(r) for r in self.regions],
            "reads": list(self.reads),
            "writes": list(self.writes),
            "loaded": list(self.loaded),
            "stored": list(self.stored),
            "outside_loads": list(self.outside_loads),
            "outside_stores": list(self.outside_stores),
            "unknown_loads": self.unknown_loads,
            "unknown_stores": self.unknown_stores,
            "widest": self.widest,
            "launches": [dict(x) for x in self.launches],
            "records": self.records,
            "dropped": self.dropped,
            "fields": list(self.fields),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AccessLog:
        names = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in names})

    # -- questions the grader asks -----------------------------------------------------------------
    def index(self, name: str) -> int:
        """The region called `name` (an input's name, an output's name, or a label); -1 if none."""
        for i, region in enumerate(self.regions):
            if region["name"] == name:
                return i
        for i, region in enumerate(self.regions):
            if region["label"] == name:
                return i
        return -1

    def per_element(self, name: str) -> float:
        """Lanes loaded from a region per element of its tensor (what `Reads.per_element` says)."""
        i = self.index(name)
        return self.loaded[i] / max(1, self.regions[i]["numel"]) if i >= 0 else 0.0

    def per_element_all(self, name: str) -> float:
        """Lanes loaded from this input and from every buffer that is not an input, per element of the input.

        The passes over memory of a one-input kernel (softmax): re-reading its output, or a scratch
        copy of the input, counts as much as re-reading the input.
        """
        i = self.index(name)
        if i < 0:
            return 0.0
        own = sum(n for n, r in zip(self.loaded, self.regions, strict=True) if r["role"] != "input")
        return (self.loaded[i] + own) / max(1, self.regions[i]["numel"])

    def outside(self) -> dict[str, int]:
        """Buffer label -> lanes loaded from its guard bands (what `Reads.outside` says)."""
        found = {}
        for region, count in zip(self.regions, self.outside_loads, strict=True):
            if count:
                label = f"the input {region['label']}" if region["role"] == "input" else region["label"]
                found[label] = found.get(label, 0) + count
        return found

    def element_counts(self, name: str, kind: str = "load") -> torch.Tensor:
        """How many times each element of the tensor was loaded (or stored), in its own index space."""
        i = self.index(name)
        region = self.regions[i]
        counts = (self.reads if kind == "load" else self.writes)[i]
        if counts.numel() == 0:
            counts = torch.zeros(region["size"], dtype=torch.int32)
        return counts.as_strided(region["shape"], region["strides"], region["offset"])

    def programs(self, launch: int | None = None) -> int:
        """Programs launched: in one launch, or in all of them."""
        chosen = self.launches if launch is None else [self.launches[launch]]
        return sum(int(np.prod(x["grid"])) for x in chosen)

    def records_of(self, name: str | None = None, kind: int | None = None) -> torch.Tensor:
        """The records (rows of FIELDS) of one region and kind."""
        rows = self.records
        if name is not None:
            rows = rows[rows[:, F["region"]] == self.index(name)]
        if kind is not None:
            rows = rows[rows[:, F["kind"]] == kind]
        return rows


# -- patching the interpreter ----------------------------------------------------------------------
def _patches(recorder: AccessRecorder) -> list[tuple[object, str, Callable]]:
    from triton.runtime import interpreter

    builder = interpreter.InterpreterBuilder
    patched: list[tuple[object, str, Callable]] = []

    def wrap(owner: object, name: str, make: Callable[[Callable], Callable]) -> None:
        original = getattr(owner, name, None)
        if original is not None:
            patched.append((owner, name, original))
            setattr(owner, name, functools.wraps(original)(make(original)))

    # Triton 3.6: (ptrs, mask, other, cache_modifier, eviction_policy, is_volatile);
    # Triton 3.9: (ptrs, mask, other, cache_policy, is_volatile). Only the leading ones matter here.
    def load(original: Callable) -> Callable:
        def create_masked_load(self, ptrs, mask, *args, **kwargs):
            recorder.access(LOAD, self, ptrs, mask)
            return original(self, ptrs, mask, *args, **kwargs)

        return create_masked_load

    def store(original: Callable) -> Callable:
        def create_masked_store(self, ptrs, value, mask, *args, **kwargs):
            recorder.access(STORE, self, ptrs, mask)
            return original(self, ptrs, value, mask, *args, **kwargs)

        return create_masked_store

    def rmw(original: Callable) -> Callable:
        def create_atomic_rmw(self, op, ptr, val, mask, *args, **kwargs):
            recorder.access(ATOMIC, self, ptr, mask)
            return original(self, op, ptr, val, mask, *args, **kwargs)

        return create_atomic_rmw

    def cas(original: Callable) -> Callable:
        def create_atomic_cas(self, ptr, *args, **kwargs):
            recorder.access(ATOMIC, self, ptr, None)
            return original(self, ptr, *args, **kwargs)

        return create_atomic_cas

    def grid(original: Callable) -> Callable:
        def set_grid_dim(self, nx, ny, nz):
            recorder.set_grid((nx, ny, nz))
            return original(self, nx, ny, nz)

        return set_grid_dim

    def launch(original: Callable) -> Callable:
        def call(self, *args, **kwargs):
            fn = getattr(self, "fn", None)
            try:
                names = list(inspect.signature(fn).parameters)
            except (TypeError, ValueError):
                names = []
            arguments = {**dict(zip(names, args, strict=False)), **kwargs}
            recorder.begin_launch(getattr(fn, "__name__", "?"), arguments)
            return original(self, *args, **kwargs)

        return call

    wrap(builder, "create_masked_load", load)
    wrap(builder, "create_masked_store", store)
    wrap(builder, "create_atomic_rmw", rmw)
    wrap(builder, "create_atomic_cas", cas)
    wrap(builder, "set_grid_dim", grid)
    wrap(interpreter.GridExecutor, "__call__", launch)
    return patched


@contextlib.contextmanager
def record_access(
    arena: Any = None, inputs: dict[str, Any] | None = None, max_records: int = DEFAULT_MAX_RECORDS
) -> Iterator[AccessRecorder]:
    """Record every load and store of Triton's interpreter inside the block.

    `arena` (a `checks.engine.memory.Arena`) names its buffers: inputs by their name in `inputs`, the
    submission's allocations by their label (wrap the call in `checks.engine.tracking.guard_allocations`
    inside this block so that they are guarded, and seen with their shape).
    """
    recorder = AccessRecorder(max_records)
    adopt = None
    if arena is not None:
        recorder.add_arena(arena, inputs)
        adopt = arena.adopt

        def adopt_and_name(template: torch.Tensor, poison: bool) -> torch.Tensor:
            view = adopt(template, poison)
            recorder._sync_arena(view)
            return view

        arena.adopt = adopt_and_name
    patched = _patches(recorder)
    try:
        yield recorder
    finally:
        for owner, name, original in reversed(patched):
            setattr(owner, name, original)
        if arena is not None:
            del arena.adopt
        recorder.flush()
