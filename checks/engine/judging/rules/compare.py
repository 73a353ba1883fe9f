"""Compare an output with the reference and say, in words, where they differ and what shape the error has.

`error_shapes` recognises the common shapes of wrong values from (yours, expected) alone: the right
values in the wrong places (swapped axes, a permutation, a head's rows in another head's place), one constant
factor everywhere (a scale applied twice or left out), and one factor per row (a normaliser with extra or missing
terms).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import torch

from checks.memory import is_poison
from checks.verdict import agree, plural

_MAX_RANGES = 6
ALL_ZERO = "every wrong element is exactly 0: were they written at all?"  # a lead, dropped beside a proven cause


@dataclass
class Mismatch:
    """What is wrong with one output: a headline and the lines that locate it."""

    headline: str
    lines: list[str]
    bad: torch.Tensor  # bool mask, the output's shape, on the CPU
    error: torch.Tensor  # |yours - expected| in float64, NaN where yours is NaN or unwritten
    unwritten: torch.Tensor | None = None  # bool mask of the elements that still hold the poison
    ratio: torch.Tensor | None = None  # yours / expected, when a factor per row is the clue (for the picture)
    cause: bool = False  # the lines name the shape of the error (swapped axes, a factor...), a cause to look at
    shapes: int = 0  # how many of the first lines name that shape (a cause proven otherwise replaces them)


def ranges(indices: list[int]) -> list[tuple[int, int]]:
    """Sorted unique indices folded into inclusive (start, end) runs."""
    runs: list[tuple[int, int]] = []
    for i in indices:
        if runs and i == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], i)
        else:
            runs.append((i, i))
    return runs


def describe_indices(indices: list[int], size: int) -> str:
    """'all 70', 'the last 6 (64-69)', '0-31, 64-95' ... with a note on block-aligned runs."""
    if len(indices) == size:
        return f"all {size}"
    runs = ranges(indices)
    text = ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs[:_MAX_RANGES])
    if len(runs) > _MAX_RANGES:
        text += f" and {len(runs) - _MAX_RANGES} more runs"
    text = f"{len(indices)} of {size}: {text}"
    if runs[-1][1] == size - 1 and len(runs) == 1 and len(indices) <= size // 2:
        text += f" (the last {len(indices)}: a tail that a block or its mask misses)"
    elif len(runs) > 1:
        starts = [a for a, _ in runs]
        for block in (1024, 512, 256, 128, 64, 32, 16):
            if all(a % block == 0 for a in starts):
                text += f" (each run starts at a multiple of {block}: whole blocks)"
                break
    return text


def without_guesses(line: str) -> str:
    """A line of `locate` without its guesses at a block or a mask (`describe_indices`' notes in brackets): for a
    report whose cause is proven otherwise."""
    return re.sub(r" \((the last \d+: a tail that a block or its mask misses|each run starts at a multiple of \d+: "
                  r"whole blocks)\)", "", line)  # fmt: skip


def locate(bad: torch.Tensor, dims: tuple[str, ...]) -> list[str]:
    """One line per dimension: which indices along it hold at least one bad element."""
    lines = []
    for axis, name in enumerate(dims):
        other = tuple(a for a in range(bad.dim()) if a != axis)
        along = bad.any(dim=other) if other else bad
        idx = along.nonzero().flatten().tolist()
        lines.append(f"{name}: {describe_indices(idx, bad.shape[axis])}")
    return lines


def _fmt(x: float) -> str:
    return f"{x:.6g}"


def first_bad(bad: torch.Tensor) -> tuple[int, ...]:
    return tuple(int(i) for i in bad.nonzero()[0].tolist())


def _unwritten_lines(
    name: str, unwritten: torch.Tensor, bad: torch.Tensor, dims: tuple[str, ...]
) -> tuple[str, list[str]]:
    """Headline and lines when some elements still hold the poison: where they are, then the other wrong ones."""
    where = first_bad(unwritten)
    count = int(unwritten.sum())
    headline = (
        f"{name}: {count} of {bad.numel()} elements {agree(count, 'was', 'were')} never written "
        f"(they still hold the grader's poison value; the first is at {list(where)})"
    )
    lines = locate(unwritten, dims)
    rest = bad & ~unwritten
    if bool(rest.any()):
        lines.append(
            f"{int(rest.sum())} more elements were written with wrong values, first at {list(first_bad(rest))}."
        )
    return headline, lines


def _wrong_lines(
    name: str,
    yours: torch.Tensor,
    expected: torch.Tensor,
    bad: torch.Tensor,
    atol: float,
    rtol: float,
    dims: tuple[str, ...],
) -> tuple[str, list[str]]:
    """Headline and lines when every element was written but some are wrong (`expected` in float64)."""
    y, e = yours.double(), expected
    error = (y - e).abs()
    finite = error[torch.isfinite(error)]
    max_abs = float(finite.max()) if finite.numel() else float("nan")
    rel = error / e.abs().clamp_min(max(atol, 1e-30))
    finite_rel = rel[torch.isfinite(rel)]
    max_rel = float(finite_rel.max()) if finite_rel.numel() else float("nan")
    n_bad = int(bad.sum())
    total = bad.numel()
    where = first_bad(bad)
    share = f"{100.0 * n_bad / total:.3g}%"
    headline = f"{name}: {n_bad} of {plural(total, 'element')} {agree(n_bad, 'is', 'are')} wrong ({share})"
    lines = [
        f"first at {list(where)}: yours {_fmt(float(y[where]))}, expected {_fmt(float(e[where]))} "
        f"(allowed error {_fmt(atol + rtol * abs(float(e[where])))})"
    ]
    n_nan = int(torch.isnan(y[bad]).sum())
    n_outside = int(is_poison(yours, "input")[bad].sum())
    if n_outside:
        lines.append(
            f"{n_outside} wrong elements hold the marker the grader puts around your inputs: the kernel "
            "read outside an input (check offsets, strides and load masks)."
        )
    if n_nan:
        lines.append(
            f"{n_nan} of the wrong elements are NaN or inf" if n_nan < n_bad else "every wrong element is NaN or inf"
        )
    else:
        lines.append(f"largest error {_fmt(max_abs)} (relative {_fmt(max_rel)})")
    zeros = int((y[bad] == 0).sum())
    if zeros == n_bad:
        lines.append(ALL_ZERO)
    lines += locate(bad, dims)
    return headline, lines


def _close(a: torch.Tensor, b: torch.Tensor, atol: float, rtol: float) -> bool:
    return a.shape == b.shape and bool(((a - b).abs() <= atol + rtol * b.abs()).all())


def _swapped_axes(y: torch.Tensor, e: torch.Tensor, atol: float, rtol: float, dims: tuple[str, ...]) -> str:
    """A sentence when yours is the expected output with two axes swapped."""
    for a in range(e.dim()):
        for b in range(a + 1, e.dim()):
            if e.shape[a] == 1 or e.shape[b] == 1:
                continue
            swapped = e.transpose(a, b)
            as_written = swapped.contiguous().reshape(e.shape)  # the transpose written out in row-major order
            if _close(y, swapped, atol, rtol) or _close(y, as_written, atol, rtol):
                names = f"{dims[a]} and {dims[b]}" if len(dims) == e.dim() else f"axes {a} and {b}"
                return (
                    f"Yours is the expected output with {names} swapped (transposed): the right values in the "
                    "wrong places; check which index goes with which stride, in the loads and in the store."
                )
    return ""


def _permuted(y: torch.Tensor, e: torch.Tensor, bad: torch.Tensor, atol: float, rtol: float) -> str:
    """A sentence when yours holds exactly the expected values, in other places: the wrong elements (two or more)
    hold the expected values of the wrong places between them. Over the whole tensor, sorted values agree within
    the tolerance whenever each error is small beside the gaps between neighbouring values, which proves nothing."""
    if int(bad.sum()) >= 2 and _close(y[bad].sort().values, e[bad].sort().values, atol, rtol):
        return (
            "Yours holds exactly the expected values, in other places (a permutation): the arithmetic is right; "
            "check how the offsets map each element to its (row, column) in the loads and the store."
        )
    return ""


def _slices_elsewhere(
    y: torch.Tensor, e: torch.Tensor, bad: torch.Tensor, unwritten: torch.Tensor, atol: float, rtol: float,
    dims: tuple[str, ...],
) -> str:  # fmt: skip
    """A sentence when every wrong slice of yours along the last dimensions (a head's rows, a row) that was written
    whole holds exactly the expected values of another slice: the right rows in another one's place."""
    if e.dim() < 2 or e.numel() > 1 << 20:
        return ""
    names = dims if len(dims) == e.dim() else tuple(f"axis {a}" for a in range(e.dim()))
    for k in range(1, e.dim()):
        size = math.prod(e.shape[k:])
        count = e.numel() // size
        rows_y, rows_e = y.reshape(count, size), e.reshape(count, size)
        wrong = bad.reshape(count, size).any(dim=1) & ~unwritten.reshape(count, size).any(dim=1)
        idx = wrong.nonzero().flatten().tolist()
        if count < 2 or not idx or len(idx) > 64:
            continue
        moved = []
        for i in idx:
            if not bool((rows_y[i].abs() > atol).any()):
                break  # near zero: it would match any slice near zero, which proves nothing
            same = ((rows_y[i][None, :] - rows_e).abs() <= atol + rtol * rows_e.abs()).all(dim=1)
            others = [j for j in same.nonzero().flatten().tolist() if j != i]
            if not others:
                break
            moved.append((i, others[0]))
        else:
            shape = tuple(e.shape[:k])
            pairs = "; ".join(f"yours at {index_of(i, shape)} is the expected at {index_of(j, shape)}"
                              for i, j in moved[:4])  # fmt: skip
            outer = ", ".join(names[:k])
            return (
                f"{len(moved)} wrong slice(s) along ({', '.join(names[k:])}) hold exactly the expected values of "
                f"another one ({pairs}{'; ...' if len(moved) > 4 else ''}): the right values, in another one's place. "
                f"Check how your kernel turns its program id into the indices along {outer} (one program per "
                "(batch, head): batch = pid // H, head = pid % H) and which stride multiplies each."
            )
    return ""


def index_of(flat: int, shape: tuple[int, ...]) -> list[int]:
    """The index of element `flat` of a row-major tensor of `shape`."""
    index = []
    for size in reversed(shape):
        flat, i = divmod(flat, size)
        index.append(i)
    return index[::-1]


def _spread(rtol: float) -> float:
    """How far apart ratios may be and still count as one factor (rounding in the output's dtype)."""
    return max(4.0 * rtol, 2e-3)


def _one_factor(y: torch.Tensor, e: torch.Tensor, rtol: float) -> float | None:
    """The factor c with yours = c * expected everywhere (where expected is not tiny), or None."""
    big = e.abs() > 1e-3 * float(e.abs().max()) if e.numel() else e.bool()
    if int(big.sum()) < 2 or not bool(torch.isfinite(y[big]).all()):
        return None
    ratio = y[big] / e[big]
    c = float(ratio.median())
    if c == 0 or not bool(((ratio - c).abs() <= _spread(rtol) * abs(c)).all()):
        return None
    return c


def _row_factors(y: torch.Tensor, e: torch.Tensor, atol: float, rtol: float) -> torch.Tensor | None:
    """One factor per row (along the last dimension) with yours = factor * expected within the output's tolerance,
    when there is such a factor for every row and they differ between rows; else None. Each row's factor is the
    least-squares one, so the rounding of small elements does not hide it."""
    if e.dim() < 2 or e.shape[-1] < 2 or e.numel() // e.shape[-1] < 2:
        return None
    rows_y, rows_e = y.reshape(-1, e.shape[-1]), e.reshape(-1, e.shape[-1])
    norm = (rows_e * rows_e).sum(dim=1)
    if not bool(torch.isfinite(rows_y).all()) or bool((norm == 0).any()):
        return None
    factor = (rows_y * rows_e).sum(dim=1) / norm
    fitted = factor[:, None] * rows_e
    if not bool(((rows_y - fitted).abs() <= atol + rtol * fitted.abs()).all()) or bool((factor == 0).any()):
        return None
    if float(factor.max() - factor.min()) <= _spread(rtol) * float(factor.abs().max()):
        return None  # one factor for the whole output: `_one_factor` says it
    return factor


def error_shapes(
    yours: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float, dims: tuple[str, ...]
) -> tuple[list[str], torch.Tensor | None]:
    """Sentences naming the shape of the error, and yours / expected when a factor per row is the clue."""
    y, e = yours.detach().cpu().double(), expected.detach().cpu().double()
    if y.shape != e.shape or not bool(torch.isfinite(e).all()):
        return [], None
    bad = ~((y - e).abs() <= atol + rtol * e.abs())
    misplaced = (
        _swapped_axes(y, e, atol, rtol, dims)
        or _slices_elsewhere(y, e, bad, torch.zeros_like(bad), atol, rtol, dims)
        or _permuted(y, e, bad, atol, rtol)
    )  # the most specific first: two axes, then whole slices, then any permutation
    if misplaced:
        return [misplaced], None
    c = _one_factor(y, e, rtol)
    if c is not None and abs(c - 1.0) > 2 * _spread(rtol):
        return [
            f"Every element is off by the same factor: yours = {c:.4g} x expected (expected = {1 / c:.4g} x yours). "
            "A constant scale is off: look for one multiplication that is doubled, missing or by another constant "
            "(a scale such as sm_scale, or a log2(e) for exp2)."
        ], None
    factors = _row_factors(y, e, atol, rtol)
    if factors is not None:
        named = len(dims) == e.dim()
        rows, along = (dims[-2], dims[-1]) if named else ("rows", "the last axis")
        if bool((factors < 1).all()):
            why = (
                "a sum with extra terms. Look at which lanes each sum counts: masked lanes loaded as 0 (keys past "
                "the end, the padding of a block) would get the score 0 where -inf belongs, and a share of the "
                "softmax."
            )
        elif bool((factors > 1).all()):
            why = (
                "a sum with missing terms. Look at which terms each sum counts: a block's sum without the other "
                "blocks', or lanes masked that count, would give this."
            )
        else:
            why = (
                "a sum with extra or missing terms. Look at which lanes and blocks each sum counts (masked lanes "
                "loaded as 0 and counted, or a block's sum without the other blocks')."
            )
        return [
            f"yours / expected is constant along {along} and differs between {rows} (from "
            f"{float(factors.min()):.4g} to {float(factors.max()):.4g}): each one is divided by a wrong normaliser, "
            + why
        ], y / torch.where(e == 0, torch.full_like(e, float("nan")), e)
    return [], None


def compare(
    name: str,
    yours: torch.Tensor,
    expected: torch.Tensor,
    atol: float,
    rtol: float,
    dims: tuple[str, ...],
) -> Mismatch | None:
    """None when every element is within atol + rtol * |expected|; else where and how it is wrong."""
    yours_cpu = yours.detach().cpu()
    unwritten = is_poison(yours_cpu)
    y = yours_cpu.double()
    e = expected.detach().cpu().double()
    error = (y - e).abs()
    ok = error <= atol + rtol * e.abs()
    ok &= ~unwritten
    bad = ~ok
    if not bool(bad.any()):
        return None
    ratio, shapes = None, []
    if bool(unwritten.any()):
        headline, lines = _unwritten_lines(name, unwritten, bad, dims)
        if y.shape == e.shape and bool(torch.isfinite(e).all()):
            elsewhere = _slices_elsewhere(y, e, bad, unwritten, atol, rtol, dims)
            shapes = [elsewhere] if elsewhere else []
            lines = shapes + lines
    else:
        headline, lines = _wrong_lines(name, yours_cpu, e, bad, atol, rtol, dims)
        shapes, ratio = error_shapes(y, e, atol, rtol, dims)
        lines = shapes + lines
    error = torch.where(unwritten, torch.full_like(error, float("nan")), error)
    return Mismatch(headline, lines, bad, error, unwritten, ratio, cause=bool(shapes), shapes=len(shapes))
