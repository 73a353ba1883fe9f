"""Guarded, poisoned memory: how the grader sees unwritten outputs and out-of-bounds writes.

Every tensor the grader hands to a submission, and every tensor the submission allocates with
`torch.empty*` while it is graded, lives in the middle of a larger buffer:

    [ guard | the tensor's own elements | guard ]

The guards hold a poison bit pattern (a NaN with a recognisable payload). After the call, a guard
that changed means something wrote outside a tensor; an output element that still holds the
poison was never written. Inputs are compared bit for bit with a snapshot, guards included.

The puzzle specs (`checks.puzzles`) draw their inputs here (`Arena`, `make_input`), and the engine judges
what a submission did to them; this module imports neither.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

# Quiet NaNs with payloads no arithmetic produces, one per float width: the first marks memory the
# submission allocated (and must write), the second the guards around inputs. They differ because
# arithmetic on a NaN keeps its payload: a store of (input guard + 1) must not look untouched.
_POISON_BITS = {
    torch.float64: (torch.int64, 0x7FF8DEADBEEFCAFE, 0x7FF8C0FFEE0C0FFE),
    torch.float32: (torch.int32, 0x7FC5A5A5, 0x7FC3C3C3),
    torch.float16: (torch.int16, 0x7E5A, 0x7E3C),
    torch.bfloat16: (torch.int16, 0x7FA5, 0x7FC3),
    # integer inputs (a page table) get guard bands too; a kernel's integer allocations are not tracked
    torch.int32: (torch.int32, 0x7FC5A5A5, 0x7FC3C3C3),
}
# The grader's own allocations must not go through the patched torch.empty (checks.engine.replay.launches).
_empty = torch.empty
_MIN_GUARD = 1 << 16
_MAX_GUARD = 1 << 22


def poisonable(dtype: torch.dtype) -> bool:
    """Whether an allocation of this dtype is guarded and poisoned (floats: integers hold no NaN to see)."""
    return dtype in _POISON_BITS and dtype.is_floating_point


def bits(t: torch.Tensor) -> torch.Tensor:
    """The raw bits of a float tensor, as integers of the same width."""
    return t.view(_POISON_BITS[t.dtype][0])


def fill_poison(t: torch.Tensor, role: str = "allocated") -> None:
    int_dtype, allocated, guard = _POISON_BITS[t.dtype]
    t.view(int_dtype).fill_(allocated if role == "allocated" else guard)


def is_poison(t: torch.Tensor, role: str = "allocated") -> torch.Tensor:
    """Boolean mask of elements that still hold the poison pattern of memory with this role."""
    if t.dtype not in _POISON_BITS:
        return _empty(t.shape, dtype=torch.bool, device=t.device).fill_(False)
    probe = _empty(1, dtype=t.dtype, device=t.device)
    fill_poison(probe, role)
    return bits(t) == bits(probe)[0]


def span(shape: tuple[int, ...], strides: tuple[int, ...]) -> int:
    """Elements between a view's first and last element, inclusive (0 for an empty view)."""
    if any(s == 0 for s in shape):
        return 0
    return 1 + sum((n - 1) * abs(st) for n, st in zip(shape, strides, strict=True))


@dataclass
class Guarded:
    """One guarded buffer: `buf[guard : guard + size]` is the body, the rest is poison."""

    buf: torch.Tensor
    guard: int
    size: int
    role: str  # "input" or "allocated"
    label: str
    snapshot: torch.Tensor | None = None

    def guard_damage(self) -> tuple[int, int, int, list[int]]:
        """(elements changed before the body, after the body, first offset after the end, the runs of
        changed offsets after the end as a flat [start, stop, start, stop, ...] list, at most MAX_SPANS runs)."""
        ok = is_poison(self.buf, self.role)
        before = int((~ok[: self.guard]).sum())
        after_mask = ~ok[self.guard + self.size :]
        after = int(after_mask.sum())
        first_after = int(after_mask.nonzero()[0, 0]) if after else -1
        return before, after, first_after, runs(after_mask) if after else []

    def poisoned(self) -> int:
        """Elements of the body that still hold this buffer's poison: an allocation no kernel wrote there."""
        return int(is_poison(self.buf[self.guard : self.guard + self.size], self.role).sum())

    def changed(self) -> int:
        """Elements (body or guard) that differ from the snapshot taken before the call."""
        assert self.snapshot is not None
        return int((bits(self.buf) != self.snapshot).sum())


MAX_SPANS = 64  # runs of written guard elements reported for a picture; the first ones are what matter


def runs(mask: torch.Tensor, most: int = MAX_SPANS) -> list[int]:
    """The first `most` runs of True in a 1-D mask, as a flat [start, stop, start, stop, ...] list."""
    hits = mask.nonzero().flatten().cpu()
    if hits.numel() == 0:
        return []
    breaks = (hits[1:] != hits[:-1] + 1).nonzero().flatten()
    starts = torch.cat([hits[:1], hits[breaks + 1]])[:most]
    stops = torch.cat([hits[breaks] + 1, hits[-1:] + 1])[:most]
    return torch.stack([starts, stops], dim=1).flatten().tolist()


def guard_size(size: int) -> int:
    return max(_MIN_GUARD, min(size, _MAX_GUARD))


@dataclass
class Arena:
    """Makes the grader's inputs and records what the submission allocates while graded."""

    device: str
    generator: torch.Generator  # shapes, layouts, integer inputs
    buffers: list[Guarded] = field(default_factory=list)
    data_generator: torch.Generator | None = None  # the values of floating-point inputs (else `generator`)

    def _guarded(self, size: int, dtype: torch.dtype, role: str, label: str) -> Guarded:
        g = guard_size(size)
        buf = _empty(g + size + g, dtype=dtype, device=self.device)
        fill_poison(buf, role)
        entry = Guarded(buf, g, size, role, label)
        self.buffers.append(entry)
        return entry

    def view(
        self, shape: tuple[int, ...], strides: tuple[int, ...], dtype: torch.dtype, role: str, label: str
    ) -> torch.Tensor:
        entry = self._guarded(span(shape, strides), dtype, role, label)
        return entry.buf.as_strided(shape, strides, entry.guard)

    def randn(self, shape: tuple[int, ...], dtype: torch.dtype, label: str, scale: float = 1.0) -> torch.Tensor:
        """A contiguous input of random normal values (every element of its buffer is drawn)."""
        shape = tuple(int(s) for s in shape)
        strides = _empty(shape, device="meta").stride() if shape else ()
        t = self.view(shape, strides, dtype, "input", label)
        body = self.buffers[-1].buf[self.buffers[-1].guard : self.buffers[-1].guard + self.buffers[-1].size]
        gen = self.data_generator or self.generator
        values = torch.randn(body.shape, generator=gen, device=self.device, dtype=torch.float32) * scale
        body.copy_(values.to(dtype))
        return t

    def integers(self, values: torch.Tensor, label: str) -> torch.Tensor:
        """A contiguous int32 input holding `values`, with guard bands like every other input."""
        shape = tuple(int(s) for s in values.shape)
        strides = _empty(shape, device="meta").stride() if shape else ()
        t = self.view(shape, strides, torch.int32, "input", label)
        t.copy_(values.to(torch.int32))
        return t

    def freeze_inputs(self) -> None:
        """Snapshot every input buffer, guards included, before the submission runs."""
        for entry in self.buffers:
            if entry.role == "input":
                entry.snapshot = bits(entry.buf).clone()

    def allocated(self) -> list[Guarded]:
        return [b for b in self.buffers if b.role == "allocated"]

    def inputs(self) -> list[Guarded]:
        return [b for b in self.buffers if b.role == "input"]

    def adopt(self, template: torch.Tensor, poison: bool) -> torch.Tensor:
        """A guarded twin of a tensor the submission just allocated (same shape, strides, dtype)."""
        shape, strides = tuple(template.shape), tuple(template.stride())
        label = f"a {tuple(shape)} {str(template.dtype).replace('torch.', '')} tensor you allocated"
        t = self.view(shape, strides, template.dtype, "allocated", label)
        if not poison:
            t.copy_(template)
        return t


def layout_view(base: torch.Tensor, layout: str) -> torch.Tensor:
    """Reinterpret a freshly drawn base tensor as the layout a case asks for.

    The base has been allocated with the shape `base_shape(shape, layout)` returns.
    """
    if layout == "contiguous":
        return base
    if layout == "transposed":
        return base.transpose(-1, -2)
    if layout == "sliced":
        return base[..., 1:-1, 3::2]
    if layout == "bnhd":
        return base.permute(0, 2, 1, 3)
    raise ValueError(f"unknown layout {layout!r}")


def base_shape(shape: tuple[int, ...], layout: str) -> tuple[int, ...]:
    """The shape to draw so that `layout_view` yields a tensor of `shape`."""
    if layout == "contiguous":
        return tuple(shape)
    *lead, m, n = shape
    if layout == "transposed":
        return (*lead, n, m)
    if layout == "sliced":
        # rows 1..m of m + 2, every other column starting at 3: strides (2n + 3, 2)
        return (*lead, m + 2, 2 * n + 3)
    if layout == "bnhd":
        b, h, nn, d = shape
        return (b, nn, h, d)
    raise ValueError(f"unknown layout {layout!r}")


def make_input(
    arena: Arena, shape: tuple[int, ...], dtype: torch.dtype, label: str, layout: str = "contiguous", scale: float = 1.0
) -> torch.Tensor:
    """A random input of `shape` in the given memory layout (a view into a guarded buffer)."""
    base = arena.randn(base_shape(tuple(shape), layout), dtype, label, scale)
    view = layout_view(base, layout)
    assert tuple(view.shape) == tuple(shape), (view.shape, shape, layout)
    return view


def describe_tensor(name: str, t: torch.Tensor) -> str:
    dtype = str(t.dtype).replace("torch.", "")
    text = f"{name} {tuple(t.shape)} {dtype}"
    if not t.is_contiguous():
        text += f" strides {tuple(t.stride())}"
    return text
