"""The offsets a plan computes at the puzzle's largest sizes, checked for integer overflow without allocating them.

A GPU computes a kernel's offsets in the integer types Triton gives them: a program id is an int32, an int argument
an int32 below 2^31 (an int64 from there: `checks.engine.compiler_arguments`), and their product or sum an int32
that wraps past 2^31 - 1 without a word, so that a load reads another tensor's memory, or faults, once the tensors
pass 2^31 elements. The interpreter's cases are too small to show it. Here the plan recorded at the largest sizes
(`checks.engine.record.largest`, on tensors of torch's meta device) is performed in Triton's interpreter without its
data:

- the tensors the plan makes or is given that are large (the data) get an address range far above any real memory
  and no storage; small ones (the metadata: a block table, sequence lengths; host-made constants) are real, so that
  the page numbers a kernel loads are the ones the case put there, at the end of the cache;
- each launch runs only the programs at the ends of its grid (the first and the last along each axis), and each loop
  of a kernel (`range`, `tl.range`) only its first and last steps: an offset affine in the program ids and the loop
  variable is largest at those ends, and a program over a sequence of 128k keys then costs two steps;
- every integer `+`, `-` and `*` of fewer than 64 bits is computed again in int64 (the check Triton builds when
  `sanitize_overflow` is on), and one whose result leaves its type's range is noted with the kernel line that
  made it and the values of one lane;
- a load gives the real values where it reads a real tensor and zeros where it reads the data; a store is dropped;
  an address outside every tensor is noted with its line; a `tl.dot` gives its accumulator back (no address comes
  from a product of the data, and numpy's float16 products would be most of the probe's time);
- a grid with more programs along an axis than a GPU launches (2^31 - 1 along axis 0, 65535 along axes 1 and 2)
  is noted.

`probe(...)` returns the findings as plain data for the observation (`CaseObservation.overflow`); the judge words
them (`checks.engine.judging.rules.overflow`).
"""

from __future__ import annotations

import contextlib
import itertools
import linecache
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from checks.engine.contract.plan import PlanError
from checks.engine.interpreted_launch import bound_launch
from checks.engine.patching import replaced
from checks.engine.replay.perform import KeptState, Performer, Tuning, interpreted_choice

REAL_LIMIT = 1 << 24  # bytes: a tensor of the plan this small is made for real (metadata, constants, small scratch)
FAKE_BASE = 1 << 52  # the first fake address: far above the memory a process on x86-64 or arm64 can map
FAKE_SPAN = 1 << 45  # the room between two fake tensors (32 TiB): one tensor's overrun never lands in another
GRID_LIMITS = (2**31 - 1, 65535, 65535)  # programs a CUDA launch may have along each axis
MAX_FINDINGS = 8
MAX_ACCESSES = 2048  # loads and stores the probe makes at most (a `while` loop over 128k keys runs in full, and a
# launch per sequence is 128 launches): about 3 s; the answer keys' probes make at most 128. A plan that needs more is
# not passed unchecked: the probe notes where it stopped ("spent"), and the judge says the offsets could not be
# followed past there (a kernel after it may read what that loop was still building)


class Spent(Exception):
    """The probe made MAX_ACCESSES loads and stores: it stops where it is, with what it found so far."""


@dataclass
class Fake:
    """A tensor of the plan without storage: what a kernel argument needs (its dtype and address), and its extent."""

    dtype: torch.dtype
    address: int
    shape: tuple[int, ...] = ()

    def data_ptr(self) -> int:
        return self.address


@dataclass
class Memory:
    """The address ranges of the plan's tensors: fake ones (the data) and real ones (metadata)."""

    fake: list[tuple[int, int, str]] = field(default_factory=list)  # (start, end, name)
    real: list[tuple[int, int, str]] = field(default_factory=list)

    def add_fake(self, nbytes: int, name: str) -> int:
        start = FAKE_BASE + len(self.fake) * FAKE_SPAN
        if nbytes > FAKE_SPAN:
            raise PlanError(f"a tensor of {nbytes} bytes, past what the largest sizes hold")
        self.fake.append((start, start + nbytes, name))
        return start

    def add_real(self, t: torch.Tensor, name: str) -> None:
        start = t.untyped_storage().data_ptr()
        self.real.append((start, start + t.untyped_storage().nbytes(), name))

    def where(self, addresses: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(inside a real tensor, inside a fake one) for each address."""
        real = np.zeros(addresses.shape, dtype=bool)
        fake = np.zeros(addresses.shape, dtype=bool)
        for start, end, _ in self.real:
            real |= (addresses >= start) & (addresses < end)
        for start, end, _ in self.fake:
            fake |= (addresses >= start) & (addresses < end)
        return real, fake


@dataclass
class Findings:
    """What the probe found, at most one finding per kind and kernel line."""

    files: dict[str, str]  # the kernels' file names -> how messages name them
    items: list[dict[str, Any]] = field(default_factory=list)
    accesses: int = 0  # loads and stores made
    kernel: str = ""  # the kernel running now
    launches: int = 0  # launches probed so far
    program: tuple[int, int, int] = (0, 0, 0)

    def note(self, kind: str, **details: Any) -> None:
        where = self.line()
        key = (kind, where.get("line"), where.get("function"))
        seen = {(f["kind"], f.get("line"), f.get("function")) for f in self.items}
        if len(self.items) >= MAX_FINDINGS or key in seen:
            return
        self.items.append({"kind": kind, "kernel": self.kernel, "program": list(self.program), **where, **details})

    def line(self) -> dict[str, Any]:
        """The innermost line of the kernels' own source running now: its function, number and text."""
        frame = sys._getframe(1)
        while frame is not None:
            if frame.f_code.co_filename in self.files:
                text = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
                return {"function": frame.f_code.co_name, "line": frame.f_lineno, "text": text}
            frame = frame.f_back
        return {}


def ends(grid: tuple[int, int, int]) -> list[tuple[int, int, int]]:
    """The programs at the ends of a grid: the first and the last along each axis, every combination."""
    return list(itertools.product(*({0, n - 1} for n in grid)))


class ProbePerformer(Performer):
    """A plan performed on the largest sizes' inputs: fake data, real metadata, only the ends of each grid."""

    def __init__(self, plan: dict[str, Any], kernels: dict[str, Any], inputs: dict[str, Any], tuning: Tuning,
                 findings: Findings) -> None:  # fmt: skip
        self.memory = Memory()
        self.findings = findings
        self.fakes: dict[str, Fake] = {}  # storage id -> its fake base
        real = {name: t for name, t in inputs.items() if not (isinstance(t, torch.Tensor) and t.is_meta)}
        super().__init__(plan, kernels, real, None, "cpu", True, None, KeptState(), tuning=tuning)
        for name, t in inputs.items():
            if isinstance(t, torch.Tensor) and t.is_meta:
                self._fake(f"input:{name}", t.dtype, t.untyped_storage().nbytes(), name)
            elif isinstance(t, torch.Tensor):
                self.memory.add_real(t, name)

    def _fake(self, ident: str, dtype: torch.dtype, nbytes: int, name: str) -> None:
        self.fakes[ident] = Fake(dtype, self.memory.add_fake(nbytes, name))

    def tensor(self, ref: dict[str, Any]) -> Any:
        fake = self.fakes.get(ref["storage"])
        if fake is None:
            return super().tensor(ref)
        return Fake(fake.dtype, fake.address + int(ref["offset"]), tuple(ref["shape"]))

    def _alloc(self, op: dict[str, Any]) -> None:
        dtype = getattr(torch, op["dtype"])
        nbytes = int(op["numel"]) * torch.empty((), dtype=dtype).element_size()
        if nbytes > REAL_LIMIT:
            self._fake(op["id"], dtype, nbytes, op["id"])
            return
        t = torch.zeros(int(op["numel"]), dtype=dtype)
        if op["fill"] != "empty":
            t.fill_(op["fill"])
        self.storages[op["id"]] = (t, 0)
        self.memory.add_real(t, op["id"])

    def _const(self, op: dict[str, Any]) -> None:
        if "values" not in op and not op.get("kept"):
            raise PlanError("a host-made tensor too large to carry")
        super()._const(op)
        self.memory.add_real(self.storages[op["id"]][0], op["id"])

    def _fill(self, op: dict[str, Any]) -> None:
        if op["dst"]["storage"] not in self.fakes:
            super()._fill(op)

    def _copy(self, op: dict[str, Any]) -> None:
        if op["dst"]["storage"] not in self.fakes and op["src"]["storage"] not in self.fakes:
            self.tensor(op["dst"]).copy_(self.tensor(op["src"]))

    def _launch(self, op: dict[str, Any]) -> None:
        if op["kernel"] not in self.kernels:
            raise PlanError(f"the kernel `{op['kernel']}`, which is not in your code")
        alternatives = op["alternatives"]
        alternative = alternatives[0 if len(alternatives) == 1 else interpreted_choice(op, self.tuning)]
        grid = [int(g) for g in alternative["grid"]]
        self.findings.kernel = op["kernel"]
        self.findings.launches += 1
        for axis, (count, limit) in enumerate(zip(grid, GRID_LIMITS, strict=False)):
            if count > limit:
                self.findings.items.append(
                    {"kind": "grid", "kernel": op["kernel"], "axis": axis, "count": count, "limit": limit}
                )
        args = {name: self.value(v) for name, v in alternative["args"].items()}
        self.kernels[op["kernel"]][tuple(grid)](**{**args, **alternative["options"]})


def _wrapped(findings: Findings) -> Any:
    """`binary_op_sanitize_overflow_impl` of Triton's semantic: the int64 check of an integer `+`, `-` or `*`, made
    here on the interpreter's values (its own is a device_assert the interpreter drops), noting a lane that wraps."""

    def check(self: Any, lhs: Any, rhs: Any, binary_op: Any) -> None:
        scalar = lhs.type.scalar
        if scalar.int_bitwidth >= 64:
            return
        a = np.asarray(lhs.handle.data).astype(np.int64)
        b = np.asarray(rhs.handle.data).astype(np.int64)
        name = binary_op.__name__
        result = a * b if name == "mul" else a + b if name == "add" else a - b
        bad = (result > scalar.get_int_max_value()) | (result < scalar.get_int_min_value())
        if np.any(bad):
            at = np.argwhere(np.broadcast_to(bad, result.shape))[0]
            pick = tuple(int(i) for i in at)
            x, y = np.broadcast_to(a, result.shape)[pick], np.broadcast_to(b, result.shape)[pick]
            findings.note("wrap", op=name, bits=int(scalar.int_bitwidth), a=int(x), b=int(y), result=int(result[pick]))

    return check


def _memory_ops(findings: Findings, memory: Memory) -> list[tuple[Any, str, Any]]:
    """The interpreter's loads give real values from real tensors and zeros from fake ones; stores and atomics are
    dropped; an address outside every tensor is noted."""
    import triton.language as tl
    from triton.runtime import interpreter

    builder = interpreter.InterpreterBuilder
    load = builder.create_masked_load

    def lanes(mask: Any, shape: tuple[int, ...]) -> np.ndarray:
        """A load's mask as booleans (a block pointer's is a bare array, a tl.load's a TensorHandle)."""
        if mask is None:
            return np.ones(shape, dtype=bool)
        return np.broadcast_to(np.asarray(getattr(mask, "data", mask), dtype=bool), shape)

    def placed(ptrs: Any, mask: Any) -> tuple[np.ndarray, np.ndarray]:
        findings.accesses += 1
        if findings.accesses > MAX_ACCESSES:
            findings.note("spent", accesses=MAX_ACCESSES, launches=findings.launches)
            raise Spent
        addresses = np.asarray(ptrs.data).astype(np.uint64)
        active = lanes(mask, addresses.shape)
        real, fake = memory.where(addresses)
        outside = active & ~real & ~fake
        if np.any(outside):
            findings.note("outside", lanes=int(np.count_nonzero(outside)))
        return real & active, fake & active

    def create_masked_load(self: Any, ptrs: Any, mask: Any, other: Any, *args: Any, **kwargs: Any) -> Any:
        real, _ = placed(ptrs, mask)
        dtype_tt = ptrs.get_element_ty()
        dtype_np = interpreter._get_np_dtype(dtype_tt)
        values = np.zeros(np.shape(ptrs.data), dtype=dtype_np)
        if other is not None:
            given = np.broadcast_to(other.data, values.shape)
            values = np.where(lanes(mask, values.shape), values, given).astype(dtype_np)
        filled = interpreter.TensorHandle(values, dtype_tt)
        return load(self, ptrs, interpreter.TensorHandle(real, tl.int1), filled, *args, **kwargs)

    def create_masked_store(self: Any, ptrs: Any, value: Any, mask: Any, *args: Any, **kwargs: Any) -> None:
        placed(ptrs, mask)

    def create_atomic_rmw(self: Any, op: Any, ptr: Any, val: Any, mask: Any, *args: Any, **kwargs: Any) -> Any:
        placed(ptr, mask)
        return interpreter.TensorHandle(np.zeros_like(val.data), val.dtype.scalar)

    def create_atomic_cas(self: Any, ptr: Any, cmp: Any, val: Any, *args: Any, **kwargs: Any) -> Any:
        placed(ptr, None)
        return interpreter.TensorHandle(np.copy(cmp.data), cmp.dtype.scalar)

    def create_dot(self: Any, a: Any, b: Any, d: Any, *args: Any, **kwargs: Any) -> Any:
        """The accumulator as it came: the values are stand-ins, and a product computes no address (numpy's float16
        products are the probe's slowest step)."""
        return interpreter.TensorHandle(np.array(d.data, copy=True), d.dtype.scalar)

    return [
        (builder, "create_masked_load", create_masked_load),
        (builder, "create_masked_store", create_masked_store),
        (builder, "create_atomic_rmw", create_atomic_rmw),
        (builder, "create_atomic_cas", create_atomic_cas),
        (builder, "create_dot", create_dot),
    ]


def ends_range(arg1: Any, arg2: Any = None, step: Any = None, **kwargs: Any) -> list[int]:
    """The first and the last step of the loop `range(arg1, arg2, step)` (`tl.range`'s arguments; its keywords, which
    only tune a GPU's pipelining, are left aside)."""
    start, end = (0, arg1) if arg2 is None else (arg1, arg2)
    steps = range(start, end, 1 if step is None else step)
    return list(steps) if len(steps) <= 2 else [steps[0], steps[-1]]


@contextlib.contextmanager
def loop_ends(kernels: dict[str, Any]) -> Iterator[None]:
    """Inside the block, the Python `range` loops of the kernels (and of every function of their files) run their
    ends only: `range` in each namespace the kernels read their names from."""
    namespaces = {id(ns): ns for ns in (_namespace(kernel) for kernel in kernels.values()) if ns is not None}
    missing = object()
    saved = {key: ns.get("range", missing) for key, ns in namespaces.items()}
    for ns in namespaces.values():
        ns["range"] = ends_range
    try:
        yield
    finally:
        for key, ns in namespaces.items():
            if saved[key] is missing:
                ns.pop("range", None)
            else:
                ns["range"] = saved[key]


def _namespace(kernel: Any) -> dict[str, Any] | None:
    while not hasattr(kernel, "__globals__") and hasattr(kernel, "fn"):
        kernel = kernel.fn
    return getattr(kernel, "__globals__", None)


def _ends_only(findings: Findings) -> Any:
    """`GridExecutor.__call__` running only the programs at the ends of the grid, and the ends of their loops, its
    arguments passed as they are (no copy to the host: a fake tensor has nothing to copy)."""
    from triton.runtime import interpreter

    def call(self: Any, *args: Any, **kwargs: Any) -> None:
        # `_ends_kept`'s `_patch_lang` while probed: tl.range runs its ends only
        with bound_launch(self, args, kwargs) as (bound, grid):
            for program in ends(grid):
                findings.program = program
                interpreter.interpreter_builder.set_grid_idx(*program)
                self.fn(**bound)

    return call


def _ends_kept(patch_lang: Any) -> Any:
    """The interpreter's `_patch_lang`, which it runs again at each call of a `@triton.jit` helper (and which sets
    `tl.range` back to a full range there), followed by `tl.range` set to run its ends only: a loop over 128k keys
    in a helper then costs two steps, as in the kernel itself."""
    import triton.language as tl

    def patch(fn: Any) -> Any:
        scope = patch_lang(fn)
        for lang in (tl, tl.core):
            scope.set_attr(lang, "range", ends_range)
        return scope

    return patch


@contextlib.contextmanager
def probed(findings: Findings, memory_of: Any) -> Iterator[None]:
    """Triton's interpreter as the probe runs it (see the module's docstring); `memory_of()` the performer's memory."""
    from triton.runtime import interpreter

    semantic = type(interpreter.interpreter_semantic)
    patches = [
        (semantic, "binary_op_sanitize_overflow_impl", _wrapped(findings)),
        (interpreter.GridExecutor, "__call__", _ends_only(findings)),
        (interpreter, "_patch_lang", _ends_kept(interpreter._patch_lang)),
        *_memory_ops(findings, memory_of),
    ]
    with replaced(patches):
        yield


def probe(
    plan: dict[str, Any], kernels: dict[str, Any], inputs: dict[str, Any], files: dict[str, str], tuning: Tuning
) -> list[dict[str, Any]]:
    """The findings of the plan recorded at the largest sizes, performed on `inputs` (`checks.puzzles.largest`):
    {"kind": "wrap" | "outside" | "grid" | "spent" | "raised", "kernel", "function", "line", "text", ...}."""
    findings = Findings(files)
    performer = ProbePerformer(plan, kernels, inputs, tuning, findings)
    try:
        with probed(findings, performer.memory), loop_ends(kernels):
            performer.run()
    except Spent:  # what it found until then stands, and where it stopped (the "spent" finding)
        pass
    except Exception as exc:  # noqa: BLE001 - a kernel that fails on the probe's values: said, not judged
        if isinstance(exc.__cause__, Spent):  # the interpreter's error around a jitted function's
            return findings.items
        findings.items.append({"kind": "raised", "kernel": findings.kernel, "text": f"{type(exc).__name__}: {exc}"})
    return findings.items


def largest_findings(
    recorded: dict[str, Any], kernels: dict[str, Any], puzzle: Any, files: dict[str, str], tuning: Tuning
) -> list[dict[str, Any]]:
    """The probe's findings for what the recording found at the largest sizes (`checks.engine.record.largest`): the
    call's plan probed on the inputs made here, or how the call raised there."""
    from checks.puzzles.largest import largest_inputs

    if "raised" in recorded:
        return [{"kind": "host_raised", "text": recorded["raised"], "where": list(recorded.get("where", []))}]
    inputs = largest_inputs(puzzle, "cpu")
    if inputs is None or "plan" not in recorded:
        return []
    return probe(recorded["plan"], kernels, inputs, files, tuning)
