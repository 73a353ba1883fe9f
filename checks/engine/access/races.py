"""Races between the programs of one launch, seen although Triton's interpreter runs them one at a time.

On a GPU the programs of a launch run at once, in no order. Three kinds of access then give a result that depends on
which program gets there first, though the interpreter, running the programs one after the other, computes the right
values:

- a race: two programs store one element, and one of them loaded it before its store (a read-modify-write such as
  `dq = tl.load(p); tl.store(p, dq + part)` across programs): on a GPU both may load the old value, and one
  program's update is lost;
- a write collision: two programs store different values to one element (with `tl.store`, or `tl.atomic_xchg`, which
  overwrites as a store does): on a GPU either may be the one kept;
- an unordered read: a program loads an element another program of the launch stored (or changed with an atomic):
  on a GPU it may load the element before the other program stores it.

An atomic orders two programs the way a GPU does (release and acquire, the default `sem="acq_rel"`; a `"relaxed"` one
orders nothing): a load by program P of what program W stored is ordered when W made an atomic on some element after
its store and P made an atomic on that element before its load (a counter the last program reads, a lock taken and
released, a flag set). Such a load is no unordered read, and a store after it (a read-modify-write under a lock) no
race and no collision. An atomic on the element itself reads it in order. Atomics that accumulate (`tl.atomic_add`,
max, min, and, or, xor) are the way to share an element and are not judged as stores.

That order is the interpreter's: W ran before P, so P's atomic came after W's. On a GPU it may come first, and the load
is then ordered only if P looked at what its atomic returned (the last program to count merges; a flag waited for).
An atomic whose value P never looks at orders nothing, and no account of one run can tell. So each such load is noted
(`ordered`), and the replay runs the call again with every launch's programs last to first
(`checks.engine.access.patches.programs_reversed`), and once more interleaved at their atomics
(`checks.engine.access.interleaving`: a ticket drawn before storing orders nothing): a load that an atomic truly
orders gives the same result in every order, one that the interpreter's order alone put after the store gives
another, which the judge compares with the reference (`checks.engine.judging.rules.races.no_race`).

`RaceWatch` follows, for each launch and each element of every tensor that is not an input, the last program that
stored it and when, and the last that loaded it and whether in order, and notes the first finding of each kind at
each line in the launch (`found`: {"kind": "race" | "collision" | "read", "launch", "kernel", "function", "line",
"region", "index", "programs": [the earlier program, the later]}).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

FOUND_LIMIT = 8  # notes kept per launch: the report names the first
NONE = -1


class _Elements:
    """One region's per-element state in the launch."""

    def __init__(self, size: int) -> None:
        self.writer = np.full(size, NONE, np.int64)  # the last program that stored the element
        self.step = np.zeros(size, np.int64)  # when it stored it (the watch's step counter)
        self.loader = np.full(size, NONE, np.int64)  # the last program that loaded it
        self.ordered = np.zeros(size, bool)  # that load came after the writer's store in every order
        self.rmw = np.zeros(size, bool)  # the writer had loaded the element before its store


class _Atomic:
    """One atomic of a program: when, where (addresses, sorted), and whether it releases and acquires."""

    __slots__ = ("acquires", "addresses", "releases", "step")

    def __init__(self, step: int, addresses: np.ndarray, releases: bool, acquires: bool) -> None:
        self.step, self.addresses, self.releases, self.acquires = step, addresses, releases, acquires


class RaceWatch:
    """The stores, loads and atomics of each launch, per element, for the recorder (`AccessRecorder`) that owns it."""

    def __init__(self, recorder: Any, where: Callable[[], tuple[str, int]]) -> None:
        """`recorder`: a RegionMap with `launches` (`checks.engine.access.recorder.AccessRecorder`); `where()`: the
        (function, line) of the kernel's source the interpreter runs now."""
        self.recorder = recorder
        self.where = where
        self.found: list[dict[str, Any]] = []
        self._state: dict[int, _Elements] = {}
        self._noted: set[tuple[str, str, int]] = set()
        self._step = 0
        self._atomics: dict[int, list[_Atomic]] = {}  # program -> its atomics in the launch
        self._acquired: dict[int, np.ndarray] = {}  # program -> the addresses it has acquired at, sorted
        self._released_after: dict[tuple[int, int], int] = {}  # (reader, writer) -> writer's last release it saw
        # loads of what another program of the launch stored that an atomic ordered (in the interpreter's order):
        # {"kind": "ordered", ...} as `found`; the replay runs such a call again with the programs last to first
        self.ordered: list[dict[str, Any]] = []

    def new_launch(self) -> None:
        self._state.clear()
        self._noted.clear()
        self._atomics.clear()
        self._acquired.clear()
        self._released_after.clear()

    # -- what the interpreter does ---------------------------------------------------------------------------------
    def loaded(self, pid: int, r: int, offsets: np.ndarray) -> None:
        """Program `pid` loaded these elements (offsets in region r's body) with a plain load."""
        elements = self._elements(r)
        if elements is None:
            return
        self._step += 1
        writer = elements.writer[offsets]
        other = (writer != NONE) & (writer != pid)
        ordered = ~other
        if other.any():
            ordered[other] = self._ordered(pid, writer[other], elements.step[offsets][other])
        elements.loader[offsets] = pid
        elements.ordered[offsets] = ordered
        if not ordered.all():
            k = int(np.argmax(~ordered))
            self._note("read", r, int(offsets[k]), [int(writer[k]), pid])
        excused = other & ordered
        if excused.any():
            k = int(np.argmax(excused))
            self._note("ordered", r, int(offsets[k]), [int(writer[k]), pid])

    def stored(self, builder: Any, ptrs: Any, value: Any, mask: Any) -> None:
        """A plain store (or an atomic exchange) of the program the interpreter runs now, before it is made (the
        memory still holds what the earlier programs stored)."""
        shape = np.shape(ptrs.data)
        lanes = _lanes(ptrs, mask)
        if lanes is None:
            return
        on = np.asarray(ptrs.data).reshape(-1)[lanes].astype(np.int64)
        watched = self._watched(on)
        if watched is None:
            return
        r, offsets, inside, elements = watched
        pid = _pid(builder)
        self._step += 1
        writer, loader = elements.writer[offsets], elements.loader[offsets]
        other = (writer != NONE) & (writer != pid)
        read_it = loader == pid
        synced = read_it & elements.ordered[offsets]  # it loaded the earlier program's value, in order
        race = other & ~synced & (read_it | elements.rmw[offsets])
        differs = other & ~synced & ~race
        if differs.any():
            values = np.broadcast_to(value.data, shape).reshape(-1)[lanes][inside]
            differs &= ~_same_bits(values, _memory(on[inside], values.dtype))
        elements.writer[offsets] = pid
        elements.step[offsets] = self._step
        elements.rmw[offsets] = read_it
        for kind, hits in (("race", race), ("collision", differs)):
            if hits.any():
                k = int(np.argmax(hits))
                self._note(kind, r, int(offsets[k]), [int(writer[k]), pid])

    def atomic(self, builder: Any, ptrs: Any, mask: Any, sem: Any) -> None:
        """An atomic of the program the interpreter runs now, after any store it makes was shown to `stored`: it reads
        its elements in order and changes them, and with `sem` other than relaxed orders the programs that make
        atomics on one element (release, acquire)."""
        lanes = _lanes(ptrs, mask)
        if lanes is None:
            return
        on = np.asarray(ptrs.data).reshape(-1)[lanes].astype(np.int64)
        pid = _pid(builder)
        self._step += 1
        name = str(getattr(sem, "name", sem)).upper().rsplit(".", 1)[-1]  # ACQUIRE_RELEASE, ACQUIRE, RELEASE, RELAXED
        releases, acquires = name not in ("RELAXED", "ACQUIRE"), name not in ("RELAXED", "RELEASE")
        addresses = np.unique(on)
        self._atomics.setdefault(pid, []).append(_Atomic(self._step, addresses, releases, acquires))
        if acquires:
            seen = self._acquired.get(pid)
            self._acquired[pid] = addresses if seen is None else np.union1d(seen, addresses)
            self._released_after = {key: v for key, v in self._released_after.items() if key[0] != pid}
        watched = self._watched(on)
        if watched is None:
            return
        _, offsets, _, elements = watched
        elements.loader[offsets] = pid
        elements.ordered[offsets] = True
        elements.writer[offsets] = pid
        elements.step[offsets] = self._step
        elements.rmw[offsets] = False

    # -- how ---------------------------------------------------------------------------------------------------
    def _ordered(self, pid: int, writers: np.ndarray, steps: np.ndarray) -> np.ndarray:
        """For each (writer, step of its store): whether the writer released at an element after that store, and
        program `pid` acquired at that element since (the writer ran before it, as the interpreter runs them)."""
        if pid not in self._acquired:
            return np.zeros(writers.shape, bool)
        last = np.zeros(writers.shape, np.int64)
        for w in np.unique(writers):
            last[writers == w] = self._last_release_seen(pid, int(w))
        return steps < last

    def _last_release_seen(self, pid: int, writer: int) -> int:
        key = (pid, writer)
        if key not in self._released_after:
            acquired = self._acquired[pid]
            self._released_after[key] = max(
                (a.step for a in self._atomics.get(writer, ()) if a.releases and np.isin(a.addresses, acquired).any()),
                default=0,
            )
        return self._released_after[key]

    def _elements(self, r: int) -> _Elements | None:
        region = self.recorder.regions[r]
        if region.role == "input":  # a store into an input is `inputs_unchanged`'s
            return None
        if r not in self._state:
            self._state[r] = _Elements(region.size)
        return self._state[r]

    def _watched(self, on: np.ndarray) -> tuple[int, np.ndarray, np.ndarray, _Elements] | None:
        """The region of these addresses, their offsets in its body that lie inside it, which those are, and the
        region's per-element state; None for an access over several regions, or none, or of an input (not judged
        here)."""
        r = self.recorder.region_at(int(on.min()))
        if r < 0 or int(on.max()) >= self.recorder.regions[r].high:
            return None
        region = self.recorder.regions[r]
        offsets = (on - region.body) // region.element_size
        inside = (offsets >= 0) & (offsets < region.size)
        elements = self._elements(r) if inside.any() else None
        return None if elements is None else (r, offsets[inside], inside, elements)

    def _note(self, kind: str, r: int, offset: int, programs: list[int]) -> None:
        function, line = self.where()
        if (kind, function, line) in self._noted or len(self._noted) >= FOUND_LIMIT:
            return
        self._noted.add((kind, function, line))
        launches = self.recorder.launches
        (self.ordered if kind == "ordered" else self.found).append({
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


def _pid(builder: Any) -> int:
    gx, gy, _ = builder.grid_dim
    x, y, z = builder.grid_idx
    return int(x + gx * (y + gy * z))


def _lanes(ptrs: Any, mask: Any) -> np.ndarray | None:
    """The lanes an access makes (its mask, flat); None when it makes none."""
    shape = np.shape(ptrs.data)
    size = int(np.prod(shape))
    lanes = np.ones(size, bool) if mask is None else np.broadcast_to(np.asarray(mask.data, bool), shape).reshape(-1)
    return lanes if lanes.any() else None


def _memory(addresses: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """What memory holds at these addresses, as elements of `dtype` (Triton's interpreter's own load)."""
    from triton.runtime.interpreter import _interpreter

    n = addresses.size
    return _interpreter.load(addresses.astype(np.uint64), np.ones(n, bool), np.zeros(n, dtype), dtype)


def _same_bits(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    width = f"u{a.dtype.itemsize}"
    return np.ascontiguousarray(a).view(width) == np.ascontiguousarray(b).view(width)
