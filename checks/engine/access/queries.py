"""An access log's records as numpy rows, for the method rules: which program made them, and where.

A record is one access (see `checks.engine.access.log.FIELDS`); its box is the min (`lo`) and max
(`hi`) index it touched along each dimension of the tensor, and its program is named by the
launch's kernel and the program's (x, y, z) in that launch's grid.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from checks.engine.access.log import STORE, AccessLog, F


def log_of(ctx: Any) -> AccessLog | None:
    """The access log of a `checks.engine.judging.rules.problem.CaseContext`; None on a GPU (no log was recorded)."""
    data = getattr(ctx.obs, "access", None)
    return AccessLog.from_dict(data) if data else None


def rows_of(log: AccessLog, name: str, kinds: tuple[int, ...]) -> np.ndarray:
    """The records of one named region with these kinds, as a numpy array (empty when none), with those of the regions
    that stand for it through the plan's copies (`AccessLog.copied`)."""
    i = log.index(name)
    if i < 0 or log.records.numel() == 0:
        return np.zeros((0, len(log.fields)), dtype=np.int64)
    rows = log.records.numpy()
    regions = [i, *log.copied(name)]  # a copy of an input is read as it; an output copied from a buffer is stored as it
    keep = np.isin(rows[:, F["region"]], regions) & np.isin(rows[:, F["kind"]], kinds)
    return rows[keep]


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


def stored_spans(log: AccessLog, names: tuple[str, ...], dim: int) -> dict[tuple[int, int], tuple[int, int]]:
    """(launch, pid) -> (first, last) index along `dim` the program stored in any of these regions."""
    spans: dict[tuple[int, int], tuple[int, int]] = {}
    for name in names:
        for row in rows_of(log, name, (STORE,)):
            key = (int(row[F["launch"]]), int(row[F["pid"]]))
            lo, hi = int(row[F[f"lo{dim}"]]), int(row[F[f"hi{dim}"]])
            old = spans.get(key)
            spans[key] = (lo, hi) if old is None else (min(old[0], lo), max(old[1], hi))
    return spans
