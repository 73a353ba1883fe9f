"""The lean interpreter (checks.engine.lean_interpreter) skips only work Triton's interpreter throws away: kernels give
the same bits, overflowing integers included, and the dropped overflow checks are no longer built."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import triton
import triton.language as tl
import triton.runtime.interpreter as interpreter
from triton.language.semantic import TritonSemantic

from checks.engine.lean_interpreter import lean_interpreter

pytestmark = pytest.mark.skipif(
    torch.cuda.is_available(), reason="the lean interpreter changes Triton's interpreter, which a GPU run does not use"
)


@triton.jit
def integer_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0)
    y = x * 65537 + offs - 7  # overflows int32 for the large values: it wraps, with or without the checks
    z = (y.to(tl.int8) * 3).to(tl.int32) - x
    tl.store(out_ptr + offs, y ^ z, mask=offs < n)


@triton.jit
def tile_kernel(a_ptr, b_ptr, out_ptr, stride, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)[:, None]
    cols = tl.arange(0, BLOCK)[None, :]
    a = tl.load(a_ptr + rows * stride + cols).to(tl.float32)
    b = tl.load(b_ptr + tl.arange(0, BLOCK)[:, None] * stride + cols).to(tl.float32)
    acc = tl.dot(a.to(tl.float16), b.to(tl.float16)) + tl.sum(a, axis=1)[:, None]
    tl.store(out_ptr + rows * stride + cols, acc.to(tl.bfloat16))


def run_kernels() -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(5)
    x = torch.randint(-(2**31), 2**31 - 1, (300,), dtype=torch.int32, generator=gen)
    ints = torch.empty_like(x)
    integer_kernel[(triton.cdiv(300, 64),)](x, ints, 300, BLOCK=64)
    a = torch.randn(32, 16, generator=gen).to(torch.bfloat16)
    b = torch.randn(16, 16, generator=gen).to(torch.float16)
    tiles = torch.empty(32, 16, dtype=torch.bfloat16)
    tile_kernel[(2,)](a, b, tiles, 16, BLOCK=16)
    return [ints, tiles]


@pytest.fixture
def interpreter_as_triton_ships_it(monkeypatch):
    """Triton's interpreter as it comes: overflow checks built, a dtype table built for every lookup."""
    builder = interpreter.interpreter_builder
    monkeypatch.setattr(builder, "options", dataclasses.replace(builder.options, sanitize_overflow=True))
    get_np_dtype = interpreter._get_np_dtype
    monkeypatch.setattr(interpreter, "_get_np_dtype", getattr(get_np_dtype, "original", get_np_dtype))
    tuple_type = tl.core.tuple_type
    if isinstance(tuple_type.__dict__.get("name"), property):
        monkeypatch.setattr(tuple_type, "__init__", tuple_type.__init__.made)
        monkeypatch.delattr(tuple_type, "name")
    asserts: list[int] = []
    device_assert = TritonSemantic.device_assert

    def counted(self, *args, **kwargs):
        asserts.append(1)
        return device_assert(self, *args, **kwargs)

    monkeypatch.setattr(TritonSemantic, "device_assert", counted)
    return asserts


def test_kernels_give_the_same_bits_and_the_dropped_checks_are_not_built(interpreter_as_triton_ships_it):
    asserts = interpreter_as_triton_ships_it
    before = run_kernels()
    built_before = len(asserts)
    assert built_before > 0, "the interpreter as shipped builds an overflow check for each integer + - *"
    assert not interpreter.interpreter_builder.options.debug, "the checks it builds are dropped: debug is off"

    assert lean_interpreter()
    del asserts[:]
    after = run_kernels()
    assert len(asserts) == 0, f"{len(asserts)} overflow checks were still built, and dropped"
    for was, now in zip(before, after, strict=True):
        assert was.dtype == now.dtype and torch.equal(was, now), "the lean interpreter changed a kernel's output"


def test_a_debugging_interpreter_keeps_its_overflow_checks(monkeypatch, interpreter_as_triton_ships_it):
    builder = interpreter.interpreter_builder
    monkeypatch.setattr(builder, "options", dataclasses.replace(builder.options, debug=True, sanitize_overflow=True))
    lean_interpreter()
    assert builder.options.sanitize_overflow, "with debug on, device_assert runs the checks: they must stay"


def test_a_tuple_types_name_reads_as_triton_formats_it(interpreter_as_triton_ships_it):
    made = [
        ([tl.core.constexpr_type(16), tl.core.constexpr_type(32)], None),
        ([tl.float32, tl.pointer_type(tl.float16)], ["acc", "ptr"]),
        ([], None),
    ]
    formatted = [tl.core.tuple_type(types, fields).name for types, fields in made]
    assert lean_interpreter()
    assert [str(tl.core.tuple_type(types, fields)) for types, fields in made] == formatted
    renamed = tl.core.tuple_type([tl.int32])
    renamed.name = "given"
    assert str(renamed) == "given"
