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
    *(f"lo{d}" for d in range(MAX_DIMS)), *(f"hi{d}" for d in range(MAX_DIMS)),
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
        per_region = self.reads if kind == "load" else self.writes
        counts = per_region[i] if i < len(per_region) else torch.zeros(0, dtype=torch.int32)
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
