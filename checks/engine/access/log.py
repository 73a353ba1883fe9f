"""The access log as plain data: what the kernels loaded and stored, and the questions rules ask of it.

`checks.engine.access.recorder` fills it in Triton's interpreter; the grader, the traffic report,
the method rules and the access maps read it. Each access the recorder kept is one row of
`records`, whose columns are `FIELDS` (`F` maps a column's name to its place): the kind (LOAD,
STORE, ATOMIC), the launch, the program, the region, the lanes, and the box of indices it touched
in the tensor's own index space (min and max along each of up to `MAX_DIMS` dimensions).

`AccessLog.to_dict()` is plain data (str, int, lists and torch tensors) that `torch.save` /
`torch.load(weights_only=True)` round-trip, and `AccessLog.from_dict` reads it back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

LOAD, STORE, ATOMIC = 0, 1, 2
MAX_DIMS = 4
FIELDS: tuple[str, ...] = (
    "kind", "launch", "pid", "region", "lanes",
    *(f"lo{d}" for d in range(MAX_DIMS)), *(f"hi{d}" for d in range(MAX_DIMS)), "via",
)  # fmt: skip
F = {name: i for i, name in enumerate(FIELDS)}


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
    # the first store into each region's guard bands: {"region", "kernel", "function", "line", "argument"}
    store_sites: list[dict[str, Any]] = field(default_factory=list)
    # the plan's copies from one region into another, in order: {"shape", "src": {"region", "strides", "offset"},
    # "dst": {...}}; an output copied from a buffer the kernels stored is seen through it (`stored_counts`, `sources`)
    copies: list[dict[str, Any]] = field(default_factory=list)
    # each load without `other=` whose mask left lanes out, which read poison: {"kernel", "function", "line", "lanes"}
    masked_poison: list[dict[str, Any]] = field(default_factory=list)
    # two programs of one launch storing one element, or one loading what the other wrote, in an order a GPU does not
    # keep (checks.engine.access.races): {"kind": "race" | "collision" | "read", "launch", "kernel", "function",
    # "line", "region", "index", "programs": [the earlier, the later]}
    races: list[dict[str, Any]] = field(default_factory=list)
    # loads of what another program of the launch stored that an atomic ordered in the interpreter's order (as `races`,
    # "kind": "ordered"): the replay runs such a call again with each launch's programs last to first
    ordered_reads: list[dict[str, Any]] = field(default_factory=list)
    # atomics that added into an allocation still holding the grader's poison: {"region", "kernel", "function", "line"}
    atomics_on_poison: list[dict[str, Any]] = field(default_factory=list)
    # provenance (`checks.engine.access.provenance`): per region, the loads of its elements through copies of them
    # (an input's elements that a copy held when a kernel loaded it), and those lanes in all
    via_reads: list[torch.Tensor] = field(default_factory=list)
    via_loaded: list[int] = field(default_factory=list)
    # per region that is not an input: the lanes loaded that held no input's value, and the distinct such elements
    derived_loaded: list[int] = field(default_factory=list)
    derived_elements: list[int] = field(default_factory=list)
    # (writer, reader) program ids (launch << 32 | pid): the reader loaded data the writer computed
    edges: torch.Tensor = field(default_factory=lambda: torch.zeros((0, 2), dtype=torch.int64))
    # of each output's region: the program that computed each element of its body (through copies), -1 none
    writers: dict[int, torch.Tensor] = field(default_factory=dict)
    # the indices each program loaded (through copies too) and stored along each dimension of a region of 2 to
    # MAX_DIMS dimensions: keys (K, 5) of (launch, pid, region, kind, dim), and key k's indices index[starts[k]:
    # starts[k + 1]]
    seen: dict[str, torch.Tensor] = field(default_factory=dict)
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
            "store_sites": [dict(site) for site in self.store_sites],
            "copies": [dict(copy) for copy in self.copies],
            "masked_poison": [dict(site) for site in self.masked_poison],
            "races": [dict(found) for found in self.races],
            "ordered_reads": [dict(found) for found in self.ordered_reads],
            "atomics_on_poison": [dict(site) for site in self.atomics_on_poison],
            "via_reads": list(self.via_reads),
            "via_loaded": list(self.via_loaded),
            "derived_loaded": list(self.derived_loaded),
            "derived_elements": list(self.derived_elements),
            "edges": self.edges,
            "writers": dict(self.writers),
            "seen": dict(self.seen),
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
        """Lanes loaded from a region per element of its tensor."""
        i = self.index(name)
        return self.loaded[i] / max(1, self.regions[i]["numel"]) if i >= 0 else 0.0

    def outside(self) -> dict[str, int]:
        """Buffer label -> lanes loaded from its guard bands."""
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
        counts = self._storage_counts(i, LOAD if kind == "load" else STORE)
        return counts.as_strided(region["shape"], region["strides"], region["offset"])

    def stored_counts(self, name: str) -> torch.Tensor:
        """How many times each element of the tensor was stored by the kernels, directly or into the elements a copy
        made it from (an output that is a copy of a buffer the kernels wrote), in its own index space."""
        i = self.index(name)
        marks = [self._storage_counts(r, STORE).clone() for r in range(len(self.regions))]
        for copy in self.copies:  # in the order the plan made them: a copy of a copy sees the first
            src, dst = copy["src"], copy["dst"]
            shape = copy["shape"]
            taken = marks[src["region"]].as_strided(shape, src["strides"], src["offset"])
            into = marks[dst["region"]].as_strided(shape, dst["strides"], dst["offset"])
            into.copy_(taken)
        region = self.regions[i]
        view = region.get("view") or region  # the view returned, where the output is part of its tensor
        return marks[i].as_strided(view["shape"], view["strides"], view["offset"])

    def copied(self, name: str) -> list[int]:
        """The regions that stand for the tensor `name` through the plan's copies: of an input, the copies made of it
        (their loads are loads of it); of anything else, an output say, the buffers it was copied from (their
        stores are its stores); and theirs in turn."""
        i = self.index(name)
        if i < 0:
            return []
        ahead = self.regions[i].get("role") == "input"
        near, far = ("src", "dst") if ahead else ("dst", "src")
        found: list[int] = []
        wanted = [i]
        while wanted:
            r = wanted.pop()
            for copy in self.copies:
                other = copy[far]["region"]
                if copy[near]["region"] == r and other != i and other not in found:
                    found.append(other)
                    wanted.append(other)
        return found

    def _storage_counts(self, r: int, kind: int) -> torch.Tensor:
        """Region r's loads (or stores) per element of its storage; zeros where none was counted."""
        per_region = self.reads if kind == LOAD else self.writes
        counts = per_region[r] if r < len(per_region) else torch.zeros(0, dtype=torch.int32)
        return counts if counts.numel() else torch.zeros(int(self.regions[r]["size"]), dtype=torch.int32)

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
