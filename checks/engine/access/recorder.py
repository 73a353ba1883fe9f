"""Collect the loads and stores a kernel makes, aggregated so that memory stays bounded.

`checks.engine.access.patches.record_access` calls `AccessRecorder.access` for every load, store
and atomic of Triton's interpreter, and `begin_launch` / `set_grid` for every launch. For every
access the recorder keeps, per region (`checks.engine.access.regions`) and kind (load, store):

- how many times each element of its body was touched (a bincount, in storage order), the lanes
  touched in all, and the lanes that hit a guard band;
- per access, up to `max_records` of them: a record (kind, launch, program, region, lanes, and the
  box of indices it touched in the tensor's own index space: min and max along each dimension);
- the widest single load (lanes, masked-off ones included), and the loads that hit no region;
- after each access (`follow`, with the values loaded or stored), where each element's value came from
  (`checks.engine.access.provenance`): a load of a copy of an input is tallied and recorded as a load of the
  input's element too (`via`), in its own index space; and, per program, the indices it touched along each
  dimension (`seen`), the programs whose data it loaded (`edges`) and the program that computed each element of
  each output (`writers`).

`AccessRecorder.log()` returns an `checks.engine.access.log.AccessLog`.

The interpreter runs programs one after the other on one thread, with the program's (x, y, z)
in `interpreter_builder.grid_idx` and the grid in `grid_dim`. A record's `pid` is the program's
place in a GPU's launch order, x + gx * (y + gy * z) (x fastest), not the interpreter's (x slowest).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch

from checks.engine.access.log import ATOMIC, FIELDS, LOAD, MAX_DIMS, STORE, AccessLog, F
from checks.engine.access.provenance import (
    LOADED_AS,
    Provenance,
    cast_back,
    handle_attributes,
    place_keys,
    program_id,
    split_ids,
)
from checks.engine.access.races import RaceWatch
from checks.engine.access.regions import Region, RegionMap

DEFAULT_MAX_RECORDS = 200_000
_FLUSH_AT = 1 << 21  # pending element offsets (all regions) before they are folded into the bincounts


class AccessRecorder(RegionMap):
    """Collects accesses while `record_access` is active; `log()` gives what it saw."""

    def __init__(self, max_records: int = DEFAULT_MAX_RECORDS) -> None:
        super().__init__()
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
        self.store_sites: list[dict[str, Any]] = []  # the first store into each region's guard bands: who, where
        self.copies: list[dict[str, Any]] = []  # the plan's copies between regions (note_copy)
        self._arguments: list[tuple[str, int]] = []  # the launch's tensor arguments: (parameter, storage address)
        self.masked_poison: list[dict[str, Any]] = []  # each load without `other=` whose mask left lanes out
        self.races = RaceWatch(self, kernel_line)  # programs of a launch sharing an element in no order
        self.atomics_on_poison: list[dict[str, Any]] = []  # atomics that added into memory no kernel had written
        self.provenance = Provenance()  # where each element's value came from (`follow`, `note_copy`)
        self._via_pending: list[list[np.ndarray]] = []  # [region] -> offsets of an input loaded through a copy
        self._via_counts: list[np.ndarray | None] = []
        self.via_lanes: list[int] = []
        self.derived_lanes: list[int] = []  # [region] -> lanes loaded that held no input's value (a kernel's results)
        self._derived_seen: list[np.ndarray | None] = []
        self._seen: dict[tuple[int, int, int, int, int], np.ndarray] = {}  # (launch, pid, region, kind, dim) -> marks

    def _add(self, region: Region) -> int:
        self.provenance.add_region(region.role)
        self._via_pending.append([])
        self._via_counts.append(None)
        self.via_lanes.append(0)
        self.derived_lanes.append(0)
        self._derived_seen.append(None)
        self._pending.append([[], []])
        self._counts.append([None, None])
        self.lanes.append([0, 0])
        self.outside.append([0, 0])
        return super()._add(region)

    # -- launches ----------------------------------------------------------------------------------
    def begin_launch(self, kernel: str, arguments: dict[str, Any]) -> None:
        self.launches.append({"kernel": kernel, "grid": [1, 1, 1]})
        self.races.new_launch()
        self._arguments = []
        for name, value in arguments.items():
            if isinstance(value, torch.Tensor) and value.numel():
                self.add_region(f"{name} of {kernel}", value)
                self._arguments.append((name, value.untyped_storage().data_ptr()))

    def set_grid(self, grid: tuple[int, int, int]) -> None:
        if not self.launches:
            self.launches.append({"kernel": "?", "grid": [1, 1, 1]})
        self.launches[-1]["grid"] = [int(g) for g in grid]

    # -- accesses ----------------------------------------------------------------------------------
    def access(self, kind: int, builder: Any, ptrs: Any, mask: Any) -> None:
        """One load, store or atomic of the program the interpreter's `builder` runs now."""
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
        r = self.region_at(lo)
        if r >= 0 and hi < self.regions[r].high:
            self._tally(kind, pid, r, on, lo, hi)
            return
        # several regions (or none) in one access: split it
        parts, unknown = self.split(on)
        self.unknown[min(kind, 1)] += unknown
        for r, part in parts:
            self._tally(kind, pid, r, part, int(part.min()), int(part.max()))

    def follow(self, kind: int, builder: Any, ptrs: Any, mask: Any, values: Any) -> None:
        """After a load, store or atomic that `access` saw: what its values say of where each element's value came
        from (`checks.engine.access.provenance`); a load of an element that holds a copy of an input is tallied as a
        load of that input's element too (`via`)."""
        addresses = np.asarray(ptrs.data)
        m = np.ones(addresses.shape, dtype=bool) if mask is None else np.asarray(mask.data, dtype=bool)
        if m.shape != addresses.shape:
            m = np.broadcast_to(m, addresses.shape)
        on = addresses[m].astype(np.int64, copy=False)
        if on.size == 0:
            return
        gx, gy, _ = builder.grid_dim
        x, y, z = builder.grid_idx
        pid = x + gx * (y + gy * z)
        provenance = self.provenance
        provenance.enter(program_id(len(self.launches) - 1, pid))
        data = np.asarray(values.data) if values is not None and kind != ATOMIC else None
        places: list[np.ndarray] | None = None
        if data is not None and data.shape == m.shape:
            first = place_keys(data, m)
            if first is not None:
                places = [first, place_keys(data, m, transposed=True)] if kind == STORE else [first]
            attr = handle_attributes(values)
            if kind == LOAD and first is not None and attr is not None:  # its values, as loaded, for what they become
                attr[LOADED_AS] = data.dtype
            if kind == STORE:  # a loaded value cast (or bitcast) to this dtype: its keys as loaded
                cast = cast_back(data, m, (attr or {}).get(LOADED_AS))
                if cast is not None:
                    places = [*(places or []), *cast]
        if kind == LOAD:
            provenance.serial += 1
        regions, offsets = self._locate(on)
        if kind == LOAD and places is None and data is not None and data.shape == m.shape:
            places = self._bits_of_copies(values, data, m, regions, offsets)
        for r in np.unique(regions):
            if r < 0:
                continue
            r = int(r)
            sel = regions == r
            part = offsets[sel]
            size = self.regions[r].size
            if kind == STORE:
                provenance.store(r, size, part, [p[sel] for p in places] if places is not None else None)
            elif kind == ATOMIC:
                provenance.atomic(r, size, part)
            else:
                ids = provenance.load(r, part, places[0][sel] if places is not None else None)
                if not provenance.is_input[r]:
                    self._tally_via(pid, ids[ids >= 0])
                    self._tally_derived(r, part[ids < 0])

    def _bits_of_copies(self, values: Any, data: np.ndarray, m: np.ndarray, regions: np.ndarray,
                        offsets: np.ndarray) -> list[np.ndarray] | None:  # fmt: skip
        """A load of integers that holds some input's float bits (an element a kernel stored by a bitcast): the keys of
        its lanes read as floats of the same width, and its handle marked as loaded so (`LOADED_AS`), so that a store
        of those integers onwards is a copy too. None for any other load of integers (indices, not data)."""
        if data.dtype.kind not in "iu" or data.dtype.itemsize not in (2, 4, 8):
            return None
        provenance = self.provenance
        holds = any(
            provenance.origin[int(r)] is not None and (provenance.origin[int(r)][offsets[regions == r]] >= 0).any()
            for r in np.unique(regions)
            if r >= 0
        )
        attr = handle_attributes(values)
        if not holds or attr is None:
            return None
        as_float = data.view(f"f{data.dtype.itemsize}")
        attr[LOADED_AS] = as_float.dtype
        return [place_keys(as_float, m)]  # type: ignore[list-item]

    def _tally_derived(self, r: int, offsets: np.ndarray) -> None:
        """Loads of a region's elements that hold no input's value (what a kernel computed, or nothing)."""
        if not offsets.size:
            return
        self.derived_lanes[r] += int(offsets.size)
        if self._derived_seen[r] is None:
            self._derived_seen[r] = np.zeros(self.regions[r].size, dtype=bool)
        self._derived_seen[r][offsets] = True

    def _locate(self, on: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(region, offset in its body) of each address; region -1 where it is in no region's body."""
        regions = np.full(on.shape, -1, dtype=np.int64)
        offsets = np.zeros(on.shape, dtype=np.int64)
        r = self.region_at(int(on.min())) if self.regions else -1
        if r >= 0 and int(on.max()) < self.regions[r].high:  # one region: the common case
            region = self.regions[r]
            rel = (on - region.body) // region.element_size
            inside = (rel >= 0) & (rel < region.size)
            regions[inside] = r
            offsets[inside] = rel[inside]
            return regions, offsets
        k = np.searchsorted(self._lows, on.astype(np.uint64), side="right") - 1
        for slot in np.unique(k):
            if slot < 0:
                continue
            r = self._by_low[slot]
            region = self.regions[r]
            sel = k == slot
            rel = (on[sel] - region.body) // region.element_size
            inside = (rel >= 0) & (rel < region.size)
            idx = np.nonzero(sel)[0][inside]
            regions[idx] = r
            offsets[idx] = rel[inside]
        return regions, offsets

    def _tally_via(self, pid: int, ids: np.ndarray) -> None:
        """Loads of inputs' elements through copies of them (their global ids)."""
        if not ids.size:
            return
        regions, offsets = split_ids(ids)
        for r in np.unique(regions):
            part = offsets[regions == r]
            r = int(r)
            self.via_lanes[r] += int(part.size)
            self._via_pending[r].append(part)
            self._pending_n += int(part.size)
            self._record(LOAD, pid, r, part, via=True)

    def _tally(self, kind: int, pid: int, r: int, on: np.ndarray, lo: int, hi: int) -> None:
        region = self.regions[r]
        es = region.element_size
        offsets = (on - region.body) // es
        end = region.body + region.size * es
        if lo < region.body or hi >= end:
            inside = (offsets >= 0) & (offsets < region.size)
            self.outside[r][min(kind, 1)] += int(offsets.size - np.count_nonzero(inside))
            if kind != LOAD and not inside.all():
                self._note_store_site(r)
            offsets = offsets[inside]
            if not offsets.size:
                return
        if kind == LOAD:
            self.races.loaded(pid, r, offsets)
        for k in (LOAD, STORE) if kind == ATOMIC else (kind,):
            self.lanes[r][k] += int(offsets.size)
            self._pending[r][k].append(offsets)
            self._pending_n += int(offsets.size)
        if self._pending_n > _FLUSH_AT:
            self.flush()
        self._record(kind, pid, r, offsets)

    def note_copy(self, source: torch.Tensor, result: torch.Tensor) -> None:
        """A copy the plan made from one region into another (`result.copy_(source)`, `source` broadcast to the
        result's shape, of any dtype): where each element of the result came from, so that the judge sees the
        kernels' stores through it (an output copied from a buffer the kernels wrote is theirs, and its rows are
        owned by the programs that stored the buffer's) and their loads of it as loads of what it copied."""
        if source.numel() == 0 or result.numel() == 0:
            return
        try:
            source = source.expand(result.shape)
        except RuntimeError:
            return
        ends = []
        for t in (source, result):
            r = self.region_at(t.data_ptr())
            if r < 0:
                return
            region = self.regions[r]
            offset = (t.data_ptr() - region.body) // region.element_size
            ends.append({"region": r, "strides": list(t.stride()), "offset": int(offset)})
        self.copies.append({"shape": list(result.shape), "src": ends[0], "dst": ends[1]})
        elements = []
        for end in ends:
            region = self.regions[end["region"]]
            body = torch.arange(region.size, dtype=torch.int64)
            try:
                elements.append(body.as_strided(list(result.shape), end["strides"], end["offset"]).reshape(-1).numpy())
            except RuntimeError:
                return
        src, dst = ends[0]["region"], ends[1]["region"]
        self.provenance.copy(src, elements[0], dst, self.regions[dst].size, elements[1])

    def note_masked_poison(self, builder: Any, lanes: int) -> None:
        """A load without `other=` whose mask left `lanes` lanes out (they read poison): once per kernel line, with
        the lanes counted over every program."""
        function, line = kernel_line()
        kernel = self.launches[-1]["kernel"] if self.launches else "?"
        for site in self.masked_poison:
            if (site["kernel"], site["function"], site["line"]) == (kernel, function, line):
                site["lanes"] += lanes
                return
        self.masked_poison.append({"kernel": kernel, "function": function, "line": line, "lanes": lanes})

    def note_atomic_on_poison(self, ptrs: Any, mask: Any) -> None:
        """An atomic about to be made: where it adds into an allocation that still holds the grader's poison (memory
        no kernel wrote, such as a `torch.empty` buffer left to an autotuner's `reset_to_zero`), note its kernel line,
        once per line and tensor."""
        from triton.runtime import interpreter

        from checks.memory import is_poison

        shape = np.shape(ptrs.data)
        lanes = np.ones(shape, bool) if mask is None else np.broadcast_to(np.asarray(mask.data, bool), shape)
        on = np.asarray(ptrs.data)[lanes].astype(np.uint64)
        if not on.size:
            return
        r = self.region_at(int(on.min()))
        if r < 0 or self.regions[r].role != "allocated" or int(on.max()) >= self.regions[r].high:
            return
        dtype = interpreter._get_np_dtype(ptrs.get_element_ty())
        if np.dtype(dtype).kind != "f":
            return
        held = interpreter._interpreter.load(on, np.ones(on.size, bool), np.zeros(on.size, dtype), dtype)
        if not bool(is_poison(torch.from_numpy(np.ascontiguousarray(held))).any()):
            return
        function, line = kernel_line()
        kernel = self.launches[-1]["kernel"] if self.launches else "?"
        site = {"region": r, "kernel": kernel, "function": function, "line": line}
        if site not in self.atomics_on_poison:
            self.atomics_on_poison.append(site)

    def _note_store_site(self, r: int) -> None:
        """Remember, once per region, which kernel line stored into its guard bands and through which argument."""
        if any(site["region"] == r for site in self.store_sites):
            return
        region = self.regions[r]
        argument = next((name for name, ptr in self._arguments if region.low <= ptr < region.high), "")
        function, line = kernel_line()
        kernel = self.launches[-1]["kernel"] if self.launches else "?"
        self.store_sites.append(
            {"region": r, "kernel": kernel, "function": function, "line": line, "argument": argument}
        )

    def _record(self, kind: int, pid: int, r: int, offsets: np.ndarray, via: bool = False) -> None:
        region = self.regions[r]
        launch = len(self.launches) - 1
        boxed = len(region.shape) <= MAX_DIMS
        indices: list[tuple[int, np.ndarray]] = []
        if boxed:
            rel = offsets - region.offset
            for d, stride in self._orders[r]:
                idx = rel // stride
                rel = rel - idx * stride
                indices.append((d, idx))
        if boxed and len(region.shape) >= 2:  # which indices along each dimension the program touched
            for d, idx in indices:
                key = (launch, pid, r, STORE if kind == STORE else LOAD, d)
                marks = self._seen.get(key)
                if marks is None:
                    marks = self._seen[key] = np.zeros(region.shape[d], dtype=bool)
                marks[idx[(idx >= 0) & (idx < region.shape[d])]] = True
        if self.n_records >= self.max_records:
            self.dropped += 1
            return
        if self.n_records == len(self._records):
            grown = np.zeros((min(self.max_records, 2 * len(self._records)), len(FIELDS)), dtype=np.int64)
            grown[: self.n_records] = self._records
            self._records = grown
        row = self._records[self.n_records]
        self.n_records += 1
        row[0], row[1], row[2], row[3], row[4] = kind, launch, pid, r, offsets.size
        row[F["via"]] = int(via)
        if not boxed:
            row[5], row[5 + MAX_DIMS] = int(offsets.min()), int(offsets.max())
            return
        for d, idx in indices:
            row[5 + d], row[5 + MAX_DIMS + d] = idx.min(), idx.max()

    def flush(self) -> None:
        """Fold the pending element offsets into the bincounts."""
        for r, region in enumerate(self.regions):
            for k in (LOAD, STORE):
                pending = self._pending[r][k]
                if not pending:
                    continue
                counts = np.bincount(np.concatenate(pending), minlength=region.size).astype(np.int32)
                previous = self._counts[r][k]
                self._counts[r][k] = counts if previous is None else previous + counts
                self._pending[r][k] = []
            if self._via_pending[r]:
                counts = np.bincount(np.concatenate(self._via_pending[r]), minlength=region.size).astype(np.int32)
                previous = self._via_counts[r]
                self._via_counts[r] = counts if previous is None else previous + counts
                self._via_pending[r] = []
        self._pending_n = 0

    def log(self) -> AccessLog:
        """Everything recorded so far, as plain data."""
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
            store_sites=[dict(site) for site in self.store_sites],
            copies=[dict(copy) for copy in self.copies],
            masked_poison=[dict(site) for site in self.masked_poison],
            races=[dict(found) for found in self.races.found],
            ordered_reads=[dict(found) for found in self.races.ordered],
            atomics_on_poison=[dict(site) for site in self.atomics_on_poison],
            via_reads=[
                torch.from_numpy(c) if c is not None else torch.zeros(0, dtype=torch.int32) for c in self._via_counts
            ],  # fmt: skip
            via_loaded=list(self.via_lanes),
            derived_loaded=list(self.derived_lanes),
            derived_elements=[int(seen.sum()) if seen is not None else 0 for seen in self._derived_seen],
            edges=torch.tensor(sorted(self.provenance.edges), dtype=torch.int64).reshape(-1, 2),
            writers={
                i: torch.from_numpy(w.copy())
                for i, (w, region) in enumerate(zip(self.provenance.writer, self.regions, strict=True))
                if w is not None and region.view is not None  # the outputs (`name_outputs`)
            },
            seen=self._seen_data(),
        )

    def _seen_data(self) -> dict[str, torch.Tensor]:
        """The indices each program touched along each dimension, as (keys, start of each key's indices, indices)."""
        keys = sorted(self._seen)
        index = [np.nonzero(self._seen[k])[0] for k in keys]
        starts = np.cumsum([0, *(len(i) for i in index)])
        return {
            "keys": torch.tensor(keys, dtype=torch.int64).reshape(-1, 5),
            "starts": torch.from_numpy(starts.astype(np.int64)),
            "index": torch.from_numpy(np.concatenate(index).astype(np.int64) if index else np.zeros(0, np.int64)),
        }


def _libraries() -> tuple[str, ...]:
    """Where the grader's and the libraries' own code lives: frames there are not the kernel's."""
    import triton

    files = [Path(__file__).parents[1], Path(triton.__file__), Path(np.__file__), Path(torch.__file__)]
    folders = {str(folder) for f in files for folder in (f.parent, f.resolve().parent)}  # a linked venv: both
    return (*sorted(folders), "<")


def kernel_line() -> tuple[str, int]:
    """(function, line) of the innermost frame of the kernel's own source that the interpreter is running now."""
    skip = _libraries()
    frame = sys._getframe(1)
    while frame is not None:
        if not frame.f_code.co_filename.startswith(skip):
            return frame.f_code.co_name, frame.f_lineno
        frame = frame.f_back
    return "", 0
