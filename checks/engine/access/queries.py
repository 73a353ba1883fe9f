"""The questions the method rules ask of an access log: which elements of an input the kernels loaded, through every
copy; which programs loaded or computed which rows; whose work another's builds on.

The account of what a kernel read is one query, `loads_of(log, name)`: how many times this call's kernels loaded
each element of the input `name`, directly or through any copy of it (the plan's copies: views, clones, dtype casts,
broadcasting `copy_`; a kernel's copies: a value stored unchanged from a load, `checks.engine.access.provenance`).
Every rule that counts reads of an input asks it. `rows_of` gives the records of those loads, a copy's in the
input's own index space; `seen_by` the indices each program loaded or stored along one dimension (element by
element, not a box); `computed_by` the elements of an output each program computed (through copies); `reached`
the programs whose work reaches others' through data they computed.

A record is one access (see `checks.engine.access.log.FIELDS`); its box is the min (`lo`) and max
(`hi`) index it touched along each dimension of the tensor, and its program is named by the
launch's kernel and the program's (x, y, z) in that launch's grid.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from checks.engine.access.log import ATOMIC, LOAD, STORE, AccessLog, F

Program = tuple[int, int]  # (launch, launch-order pid)


def log_of(ctx: Any) -> AccessLog | None:
    """The access log of a `checks.engine.judging.rules.problem.CaseContext`; None on a GPU (no log was recorded)."""
    data = getattr(ctx.obs, "access", None)
    return AccessLog.from_dict(data) if data else None


def loads_of(log: AccessLog, name: str) -> torch.Tensor:
    """How many times this call's kernels loaded each element of the input `name`, directly or through any copy of it,
    in the input's own index space (int32, the input's shape): the one account of what the kernels read of it.

    A copy is any element that held the input element's value unchanged when a kernel loaded it: a view of the input,
    an element of a tensor the plan made from it (`clone`, `contiguous`, `.to(dtype)`, a broadcasting `copy_`, and
    copies of those), or an element a kernel stored with the bit-identical value of an element of it that the same
    program loaded (not the max or min of a loaded slice: a reduction's result is new data). Zeros where `name` is
    not a region of the log."""
    i = log.index(name)
    if i < 0:
        return torch.zeros(0, dtype=torch.int32)
    region = log.regions[i]
    counts = log._storage_counts(i, LOAD).clone()
    via = log.via_reads[i] if i < len(log.via_reads) else torch.zeros(0, dtype=torch.int32)
    if via.numel():
        counts += via
    return counts.as_strided(region["shape"], region["strides"], region["offset"])


def load_count(log: AccessLog, name: str) -> int:
    """`loads_of(log, name).sum()`, without building the tensor: the lanes this call's kernels loaded from the input
    `name` and from copies of it; 0 where `name` is not a region of the log."""
    i = log.index(name)
    if i < 0:
        return 0
    return int(log.loaded[i]) + (int(log.via_loaded[i]) if i < len(log.via_loaded) else 0)


def rows_of(log: AccessLog, name: str, kinds: tuple[int, ...]) -> np.ndarray:
    """The records of one named region with these kinds, as a numpy array (empty when none). Of an input, its loads
    through copies too (records in its own index space, `via` 1); of anything else, an output say, the stores of the
    buffers it was copied from (`AccessLog.copied`)."""
    i = log.index(name)
    if i < 0 or log.records.numel() == 0:
        return np.zeros((0, len(log.fields)), dtype=np.int64)
    rows = log.records.numpy()
    ahead = log.regions[i].get("role") == "input"  # its copies' loads are recorded as its own, `via`
    regions = [i] if ahead else [i, *log.copied(name)]
    keep = np.isin(rows[:, F["region"]], regions) & np.isin(rows[:, F["kind"]], kinds)
    return rows[keep]


def seen_by(log: AccessLog, name: str, kind: int, dim: int) -> dict[Program, np.ndarray]:
    """(launch, pid) -> the sorted indices along `dim` of the tensor `name` that the program loaded (kind LOAD: an
    input's through its copies too) or stored (STORE, or ATOMIC), element by element (a load that gathers one far lane
    adds that lane's index, not the box up to it). Only for tensors of 2 to `MAX_DIMS` dimensions."""
    i = log.index(name)
    found: dict[Program, np.ndarray] = {}
    keys = log.seen.get("keys") if log.seen else None
    if i < 0:
        return found
    if keys is None:  # a log written without them (made by hand): the boxes of its records
        kinds = (LOAD, ATOMIC) if kind == LOAD else (STORE, ATOMIC)
        for row in rows_of(log, name, kinds):
            who = (int(row[F["launch"]]), int(row[F["pid"]]))
            box = np.arange(int(row[F[f"lo{dim}"]]), int(row[F[f"hi{dim}"]]) + 1)
            found[who] = np.union1d(found[who], box) if who in found else box
        return found
    want = STORE if kind != LOAD else LOAD
    starts, index = log.seen["starts"].numpy(), log.seen["index"].numpy()
    for k, (launch, pid, region, kd, d) in enumerate(keys.tolist()):
        if region == i and kd == want and d == dim:
            found[(launch, pid)] = index[starts[k] : starts[k + 1]]
    return found


def computed_by(log: AccessLog, name: str) -> dict[Program, np.ndarray]:
    """(launch, pid) -> a bool mask, in the output's own index space, of the elements of the output `name` whose values
    the program computed: it stored them last, or stored what a copy carried into them (a host copy of a scratch
    buffer, or a kernel that loads and stores it unchanged). Empty where the log does not follow the output."""
    i = log.index(name)
    writers = log.writers.get(i) if i >= 0 else None
    if writers is None or writers.numel() == 0:
        return {}
    region = log.regions[i]
    view = region.get("view") or region
    seen = writers.as_strided(view["shape"], view["strides"], view["offset"]).numpy()
    return {_program(int(w)): seen == w for w in np.unique(seen) if w >= 0}


def reached(log: AccessLog, start: set[Program]) -> set[Program]:
    """The programs whose loads build on data that one of `start` computed, directly or through others (not through
    copies of inputs, which carry no program's work), with `start` itself."""
    after: dict[Program, set[Program]] = {}
    for w, r in log.edges.tolist():
        after.setdefault(_program(w), set()).add(_program(r))
    found, todo = set(start), list(start)
    while todo:
        for nxt in after.get(todo.pop(), ()):
            if nxt not in found:
                found.add(nxt)
                todo.append(nxt)
    return found


def _program(ident: int) -> Program:
    return ident >> 32, ident & 0xFFFFFFFF


def lows(rows: np.ndarray, dim: int) -> np.ndarray:
    """The lowest index each record touched along `dim`."""
    return rows[:, F[f"lo{dim}"]]


def highs(rows: np.ndarray, dim: int) -> np.ndarray:
    """The highest index each record touched along `dim`."""
    return rows[:, F[f"hi{dim}"]]


def program_name(log: AccessLog, launch: int, pid: int) -> str:
    """'kernel, program (x, y)' for a record's launch and launch-order pid."""
    if launch >= len(log.launches):
        return f"program {pid}"
    gx, gy, gz = log.launches[launch]["grid"]
    x, y, z = pid % gx, (pid // gx) % gy, pid // (gx * gy)
    ids = (x,) if gy == gz == 1 else (x, y) if gz == 1 else (x, y, z)
    return f"{log.launches[launch]['kernel']}, program {ids if len(ids) > 1 else ids[0]}"
