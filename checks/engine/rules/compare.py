"""Compare an output with the reference and say, in words, where they differ."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from checks.engine.memory import is_poison

_MAX_RANGES = 6


@dataclass
class Mismatch:
    """What is wrong with one output: a headline and the lines that locate it."""

    headline: str
    lines: list[str]
    bad: torch.Tensor  # bool mask, the output's shape, on the CPU
    error: torch.Tensor  # |yours - expected| in float64, NaN where yours is NaN or unwritten


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
    headline = (
        f"{name}: {int(unwritten.sum())} of {bad.numel()} elements were never written "
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
    headline = f"{name}: {n_bad} of {total} elements are wrong ({100.0 * n_bad / total:.3g}%)"
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
        lines.append("every wrong element is exactly 0: were they written at all?")
    lines += locate(bad, dims)
    return headline, lines


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
    if bool(unwritten.any()):
        headline, lines = _unwritten_lines(name, unwritten, bad, dims)
    else:
        headline, lines = _wrong_lines(name, yours_cpu, e, bad, atol, rtol, dims)
    error = torch.where(unwritten, torch.full_like(error, float("nan")), error)
    return Mismatch(headline, lines, bad, error)
