"""The access recorder (checks.engine.access), the traffic report and the access maps, in Triton's interpreter."""

from __future__ import annotations

import contextlib
import io
import os
import textwrap
from pathlib import Path

import pytest
import torch

from checks.engine.access import interleaving
from checks.engine.access.interleaving import programs_interleaved
from checks.engine.access.log import ATOMIC, FIELDS, LOAD, STORE, AccessLog, F
from checks.engine.access.patches import programs_reversed, record_access
from checks.engine.access.queries import loads_of
from checks.engine.access.traffic import traffic_lines
from checks.engine.judging.rules.core import passes
from checks.engine.submission import load_module
from checks.memory import Arena, make_input
from tests.helpers import Log, attention_log, guard_allocations, matmul_log, region

KERNELS = """
import torch
import triton
import triton.language as tl


@triton.jit
def add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr, MASKED: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if MASKED:
        x = tl.load(x_ptr + offs, mask=offs < n)
        y = tl.load(y_ptr + offs, mask=offs < n)
    else:
        x = tl.load(x_ptr + offs)
        y = tl.load(y_ptr + offs)
    tl.store(out_ptr + offs, x + y, mask=offs < n)


@triton.jit
def tile_copy(a_ptr, out_ptr, M, N, stride_am, stride_an, BM: tl.constexpr, BN: tl.constexpr):
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.program_id(1) * BN + tl.arange(0, BN)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    a = tl.load(a_ptr + rows[:, None] * stride_am + cols[None, :] * stride_an, mask=mask)
    tl.store(out_ptr + rows[:, None] * N + cols[None, :], a, mask=mask)


@triton.jit
def cast_copy(x_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr + offs, tl.where(offs < n, (x.to(tl.float32) + 0.0) * scale, 0.0), mask=offs < n)
    none = (offs < 0)[:, None]  # an atomic of no lane, whose mask is broadcast to a shape given as a tl.tuple
    tl.atomic_add(out_ptr + offs[:, None] + tl.arange(0, 2)[None, :], x.to(tl.float32)[:, None], mask=none)


@triton.jit
def laundered_copy(x_ptr, out_ptr, HOW: tl.constexpr):
    # a 16 x 16 float16 tile stored as float32 through an operation that keeps every value
    rows, cols = tl.arange(0, 16)[:, None], tl.arange(0, 16)[None, :]
    x = tl.load(x_ptr + rows * 16 + cols)
    if HOW == "dot":  # the identity times x
        y = tl.dot((rows == cols).to(tl.float16), x)
    else:  # a sum over an axis of size 1
        y = tl.sum(x.to(tl.float32)[:, :, None], 2)
    tl.store(out_ptr + rows * 16 + cols, y)


@triton.jit
def bits_copy(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(out_ptr + offs, x.to(tl.int16, bitcast=True), mask=offs < n)


@triton.jit
def int_copy(a_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(a_ptr + offs, mask=offs < n), mask=offs < n)


@triton.jit
def block_ptr_copy(a_ptr, out_ptr, M, N, stride_am, stride_an, BM: tl.constexpr, BN: tl.constexpr):
    src = tl.make_block_ptr(a_ptr, (M, N), (stride_am, stride_an), (tl.program_id(0) * BM, 0), (BM, BN), (1, 0))
    dst = tl.make_block_ptr(out_ptr, (M, N), (N, 1), (tl.program_id(0) * BM, 0), (BM, BN), (1, 0))
    tl.store(dst, tl.load(src, boundary_check=(0, 1)), boundary_check=(0, 1))


@triton.jit
def descriptor_copy(a_ptr, out_ptr, M, N, stride_am, BM: tl.constexpr, BN: tl.constexpr):
    src = tl.make_tensor_descriptor(a_ptr, shape=[M, N], strides=[stride_am, 1], block_shape=[BM, BN])
    dst = tl.make_tensor_descriptor(out_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    dst.store([tl.program_id(0) * BM, 0], src.load([tl.program_id(0) * BM, 0]))


@triton.jit
def total(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    # every lane adds into out[0] (tl.sum is a @triton.jit function: not callable once triton was
    # imported before TRITON_INTERPRET was set, as in this test process)
    tl.atomic_add(out_ptr + offs * 0, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


@triton.jit
def add_into(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.atomic_add(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


@triton.jit
def shared_add(x_ptr, out_ptr, BLOCK: tl.constexpr, HOW: tl.constexpr):
    offs = tl.arange(0, BLOCK)  # every program adds its x into the same BLOCK elements of out
    x = tl.load(x_ptr + tl.program_id(0) * BLOCK + offs)
    if HOW == "atomic":
        tl.atomic_add(out_ptr + offs, x)
    elif HOW == "add":
        tl.store(out_ptr + offs, tl.load(out_ptr + offs) + x)
    elif HOW == "own":  # each program its own elements: no element is shared
        tl.store(out_ptr + tl.program_id(0) * BLOCK + offs, tl.load(out_ptr + tl.program_id(0) * BLOCK + offs) + x)
    else:  # "store": each program stores its own x there, "same": each stores one value
        tl.store(out_ptr + offs, x if HOW == "store" else x * 0 + 1.0)


@triton.jit
def shared_by_atomics(x_ptr, out_ptr, part_ptr, sync_ptr, BLOCK: tl.constexpr, HOW: tl.constexpr):
    # two programs share out (or part) with atomics: some orders that hold on a GPU, some that do not
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + pid * BLOCK + offs)
    if HOW == "xchg":  # each program exchanges its own x into the same elements (as bits): a collision
        tl.atomic_xchg(out_ptr.to(tl.pointer_type(tl.int32)) + offs, x.to(tl.int32, bitcast=True))
    elif HOW == "cas_then_store":  # a compare-and-swap that takes no lock, then stores of different values
        tl.atomic_cas(sync_ptr, 0, 0)
        tl.store(out_ptr + offs, x)
    elif HOW == "lock":  # a load-add-store under a lock, taken and released
        while tl.atomic_cas(sync_ptr, 0, 1) != 0:
            pass
        tl.store(out_ptr + offs, tl.load(out_ptr + offs) + x)
        tl.atomic_xchg(sync_ptr, 0)
    elif HOW == "unread":  # the same, behind atomics whose value program 1 never looks at: ordered only as it ran
        if pid == 0:
            tl.store(part_ptr + offs, x)
            tl.atomic_add(sync_ptr, 1)
        else:
            tl.atomic_add(sync_ptr, 1)
            tl.store(out_ptr + offs, tl.load(part_ptr + offs) + x)
    elif HOW == "ticket":  # the program that draws the last ticket merges, though the others may not have stored
        ticket = tl.atomic_add(sync_ptr, 1)
        tl.store(part_ptr + ticket * BLOCK + offs, tl.load(x_ptr + ticket * BLOCK + offs))
        tl.atomic_add(sync_ptr + 1, 1)  # counted, never looked at
        if ticket == tl.num_programs(0) - 1:
            tl.store(out_ptr + offs, tl.load(part_ptr + offs) + tl.load(part_ptr + BLOCK + offs))
    elif HOW == "flag" or HOW == "plain_flag":  # program 0 waits, reading a flag, for program 1 to store its part
        if pid == 1:
            tl.store(part_ptr + offs, x)
            tl.atomic_xchg(sync_ptr, 1)
        else:
            while tl.load(sync_ptr, volatile=HOW == "flag") == 0:
                pass
            tl.store(out_ptr + offs, tl.load(part_ptr + offs) + x)
    elif HOW == "padded_ticket":  # as "ticket", behind 64 programs that make an atomic and nothing else
        if pid < 64:
            tl.atomic_add(sync_ptr + 1, 0)
        else:
            ticket = tl.atomic_add(sync_ptr, 1)
            tl.store(part_ptr + ticket * BLOCK + offs, tl.load(x_ptr + ticket * BLOCK + offs))
            tl.atomic_add(sync_ptr + 1, 1)  # counted, never looked at
            if ticket == tl.num_programs(0) - 65:
                tl.store(out_ptr + offs, tl.load(part_ptr + offs) + tl.load(part_ptr + BLOCK + offs))
    elif HOW == "forever":  # every program waits for a flag no program sets
        while tl.atomic_add(sync_ptr, 0) == 0:
            pass
    elif HOW == "chain":  # program p adds what program p - 1 left once p - 1's flag is up; the last stores the sum
        if pid > 0:
            while tl.atomic_add(sync_ptr + pid - 1, 0) == 0:
                pass
            x += tl.load(part_ptr + (pid - 1) * BLOCK + offs)
        tl.store(part_ptr + pid * BLOCK + offs, x)
        tl.atomic_xchg(sync_ptr + pid, 1)
        if pid == tl.num_programs(0) - 1:
            tl.store(out_ptr + offs, x)
    elif HOW == "read":  # program 1 loads what program 0 stored, with nothing that orders them
        if pid == 0:
            tl.store(part_ptr + offs, x)
        else:
            tl.store(out_ptr + offs, tl.load(part_ptr + offs) + x)
    else:  # "counter" (and "relaxed", which orders nothing): the last program to count merges every part
        tl.store(part_ptr + pid * BLOCK + offs, x)
        if HOW == "counter":
            done = tl.atomic_add(sync_ptr, 1)
        else:
            done = tl.atomic_add(sync_ptr, 1, sem="relaxed")
        if done == tl.num_programs(0) - 1:
            tl.store(out_ptr + offs, tl.load(part_ptr + offs) + tl.load(part_ptr + BLOCK + offs))


@triton.jit
def spill(x_ptr, out_ptr, n, BLOCK: tl.constexpr, OTHER: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    if OTHER:
        x = tl.load(x_ptr + offs, mask=offs < n, other=0)
    else:
        x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(out_ptr + offs, x)  # every lane, the masked-off ones too


@triton.jit
def block_ptr_spill(a_ptr, out_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr, PAD: tl.constexpr):
    src = tl.make_block_ptr(a_ptr, (M, N), (N, 1), (0, 0), (BM, BN), (1, 0))
    if PAD:
        a = tl.load(src, boundary_check=(0, 1), padding_option="zero")
    else:
        a = tl.load(src, boundary_check=(0, 1))
    tl.store(out_ptr + tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :], a)


@triton.jit
def descriptor_spill(a_ptr, out_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    src = tl.make_tensor_descriptor(a_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    tl.store(out_ptr + tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :], src.load([0, 0]))
"""


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    """The kernels above, decorated in Triton's interpreter (the environment is put back afterwards)."""
    from triton.runtime.autotuner import Autotuner

    before, bench = os.environ.get("TRITON_INTERPRET"), Autotuner._bench
    os.environ["TRITON_INTERPRET"] = "1"
    path = tmp_path_factory.mktemp("kernels") / "access_kernels.py"
    path.write_text(KERNELS, encoding="utf-8")
    module = load_module(path, "access_kernels")
    x = torch.ones(8)
    module.add[(1,)](x, x, torch.empty(8), 8, BLOCK=8, MASKED=True)  # the interpreter's first launch costs seconds
    yield module
    Autotuner._bench = bench
    if before is None:
        os.environ.pop("TRITON_INTERPRET", None)
    else:
        os.environ["TRITON_INTERPRET"] = before


def arena() -> Arena:
    gen = torch.Generator()
    gen.manual_seed(0)
    return Arena("cpu", gen)


def vector_add(kernels, n: int = 100, block: int = 32, masked: bool = True, **options):
    a = arena()
    inputs = {"x": make_input(a, (n,), torch.float32, "x"), "y": make_input(a, (n,), torch.float32, "y")}
    with record_access(a, inputs, **options) as rec, guard_allocations(a):
        out = torch.empty(n)
        kernels.add[(-(-n // block),)](inputs["x"], inputs["y"], out, n, BLOCK=block, MASKED=masked)
    rec.name_outputs([out], ["out"])
    return rec.log(), out, inputs


@pytest.mark.slow
def test_loads_and_stores_are_counted_per_element_and_program(kernels):
    log, out, inputs = vector_add(kernels)
    torch.testing.assert_close(out, inputs["x"] + inputs["y"])
    assert [r["name"] for r in log.regions] == ["x", "y", "out"]
    assert log.loaded == [100, 100, 0] and log.stored == [0, 0, 100]
    assert log.per_element("x") == 1.0 and log.widest == 32
    assert log.outside() == {} and log.programs() == 4
    assert log.launches == [{"kernel": "add", "grid": [4, 1, 1]}]
    assert torch.equal(log.element_counts("x"), torch.ones(100, dtype=torch.int32))
    stores = log.records_of("out", STORE)
    assert stores[:, F["pid"]].tolist() == [0, 1, 2, 3]
    assert stores[:, F["lo0"]].tolist() == [0, 32, 64, 96] and stores[:, F["hi0"]].tolist() == [31, 63, 95, 99]
    assert stores[:, F["lanes"]].tolist() == [32, 32, 32, 4]  # masked-off lanes are not counted


def test_reading_a_scratch_copy_counts_as_reading_the_input(kernels):
    a = arena()
    x = make_input(a, (100,), torch.float32, "x")
    with record_access(a, {"x": x}) as rec, guard_allocations(a):
        copy = torch.empty(100)
        kernels.add[(4,)](x, x, copy, 100, BLOCK=32, MASKED=True)  # copy = 2x, reading x twice
        out = torch.empty(100)
        kernels.add[(4,)](copy, copy, out, 100, BLOCK=32, MASKED=True)  # then the copy twice
    log = rec.log()
    assert log.per_element("x") == 2.0 and passes(log, "x", count_all=True) == 4.0  # what x + x holds: a pass
    assert passes(log, "x", count_all=False) == 2.0  # x + x is new data, no copy of x


def test_a_broadcasting_copy_of_an_input_is_followed_element_by_element(kernels):
    """The plan's copy into a tensor of another shape (`wide.copy_(x)`, x broadcast along a new dimension, in another
    dtype): a load of wide[1] is a load of x, in x's own index space."""
    a = arena()
    x = make_input(a, (100,), torch.float32, "x")
    with record_access(a, {"x": x}) as rec, guard_allocations(a):
        wide = torch.empty((2, 100), dtype=torch.float64)
        wide.copy_(x)
        rec.note_copy(x, wide)
        out = torch.empty(100, dtype=torch.float64)
        kernels.add[(4,)](wide[1], wide[1], out, 100, BLOCK=32, MASKED=True)
    log = rec.log()
    assert loads_of(log, "x").tolist() == [2] * 100 and log.via_loaded[log.index("x")] == 200


def test_a_kernels_copy_of_an_input_is_read_as_the_input_whatever_its_size(kernels):
    """Two half-size copies a kernel made of x (bit-identical values stored from its loads), each read twice: every
    element of x is loaded once directly and twice through its copy, counted in x's own index space."""
    a = arena()
    x = make_input(a, (8, 32), torch.float32, "x")
    with record_access(a, {"x": x}) as rec, guard_allocations(a):
        left, right = torch.empty(8, 16), torch.empty(8, 16)
        kernels.tile_copy[(1, 1)](x, left, 8, 16, x.stride(0), x.stride(1), BM=8, BN=16)
        kernels.tile_copy[(1, 1)](x[:, 16:], right, 8, 16, x.stride(0), x.stride(1), BM=8, BN=16)
        out = torch.empty(128)
        for _ in range(2):
            kernels.add[(4,)](left, right, out, 128, BLOCK=32, MASKED=True)
    log = rec.log()
    assert loads_of(log, "x").tolist() == [[3] * 32] * 8
    assert passes(log, "x", count_all=False) == 3.0
    via = log.records[log.records[:, F["via"]] == 1]
    assert set(via[:, F["region"]].tolist()) == {log.index("x")} and int(via[:, F["lanes"]].sum()) == 2 * 256


@pytest.mark.parametrize("scale, reads", [(1.0, 3), (2.0, 1)])
def test_a_kernels_copy_cast_to_another_dtype_is_read_as_the_input(kernels, scale, reads):
    """A float16 input that a kernel stores as float32 through operations that keep its values (a cast, + 0.0, * 1.0,
    a select) is copied: each load of the float32 buffer is a load of x. Scaled by 2 it is new data."""
    a = arena()
    x = make_input(a, (96,), torch.float16, "x")
    with record_access(a, {"x": x}) as rec, guard_allocations(a):
        wide = torch.empty(96)
        kernels.cast_copy[(3,)](x, wide, 96, scale, BLOCK=32)
        out = torch.empty(96)
        kernels.add[(3,)](wide, wide, out, 96, BLOCK=32, MASKED=True)
    assert loads_of(rec.log(), "x").tolist() == [reads] * 96


@pytest.mark.parametrize("how", ["dot", "sum"])
def test_a_copy_through_a_product_with_the_identity_or_a_sum_of_one_term_is_read_as_the_input(kernels, how):
    """A float16 tile stored as float32 through `tl.dot` with the identity, or through a sum over an axis of size 1,
    holds x's values at their places: each load of the copy is a load of x."""
    a = arena()
    x = make_input(a, (256,), torch.float16, "x")
    with record_access(a, {"x": x}) as rec, guard_allocations(a):
        wide = torch.empty(256)
        kernels.laundered_copy[(1,)](x, wide, HOW=how)
        out = torch.empty(256)
        kernels.add[(8,)](wide, wide, out, 256, BLOCK=32, MASKED=True)
    assert loads_of(rec.log(), "x").tolist() == [3] * 256


def test_a_kernels_copy_of_the_bits_in_an_integer_buffer_is_read_as_the_input(kernels):
    """A float16 input that a kernel stores bit for bit into an int16 buffer (a bitcast), which another kernel copies
    as integers: each load of either buffer is a load of x (1 + 1 + 2 per element)."""
    a = arena()
    x = make_input(a, (96,), torch.float16, "x")
    with record_access(a, {"x": x}) as rec, guard_allocations(a):
        bits, again = torch.empty(96, dtype=torch.int16), torch.empty(96, dtype=torch.int16)
        kernels.bits_copy[(3,)](x, bits, 96, BLOCK=32)
        kernels.int_copy[(3,)](bits, again, 96, BLOCK=32)
        out = torch.empty(96, dtype=torch.int16)
        kernels.add[(3,)](again, again, out, 96, BLOCK=32, MASKED=True)
    assert loads_of(rec.log(), "x").tolist() == [4] * 96


def test_loads_past_the_end_hit_the_guard_band(kernels):
    log, _, _ = vector_add(kernels, masked=False)
    assert log.outside() == {"the input x": 28, "the input y": 28}
    assert log.loaded[0] == 100


def test_the_log_is_plain_data(kernels):
    log, _, _ = vector_add(kernels)
    buffer = io.BytesIO()
    torch.save(log.to_dict(), buffer)
    buffer.seek(0)
    back = AccessLog.from_dict(torch.load(buffer, weights_only=True))
    assert back.regions == log.regions and back.loaded == log.loaded and back.launches == log.launches
    assert torch.equal(back.records, log.records) and back.fields == list(FIELDS)
    assert all(torch.equal(a, b) for a, b in zip(back.reads, log.reads, strict=True))


def test_records_are_capped_but_totals_are_not(kernels):
    log, _, _ = vector_add(kernels, n=1000, max_records=5)
    assert len(log.records) == 5 and log.dropped == 32 * 3 - 5
    assert log.loaded[0] == 1000 and int(log.reads[0].sum()) == 1000


def test_pending_offsets_are_folded_into_the_counts(kernels, monkeypatch):
    import checks.engine.access.recorder as access_recorder

    monkeypatch.setattr(access_recorder, "_FLUSH_AT", 10)
    log, _, _ = vector_add(kernels, n=300)
    assert torch.equal(log.element_counts("y"), torch.ones(300, dtype=torch.int32))


@pytest.mark.slow  # a 2D kernel in the interpreter: seconds on a busy machine
def test_boxes_are_in_the_tensors_own_index_space(kernels):
    a = arena()
    src = make_input(a, (40, 24), torch.float32, "a", "transposed")  # strides (1, 40)
    with record_access(a, {"a": src}) as rec, guard_allocations(a):
        out = torch.empty((40, 24))
        kernels.tile_copy[(3, 2)](src, out, 40, 24, src.stride(0), src.stride(1), BM=16, BN=16)
    rec.name_outputs([out], ["out"])
    log = rec.log()
    torch.testing.assert_close(out, src)
    loads = log.records_of("a", LOAD)
    # program (x, y) = (2, 1) is the 6th in launch order: rows 32-39, columns 16-23
    last = loads[loads[:, F["pid"]] == 2 + 3 * 1][0]
    assert [int(last[F[k]]) for k in ("lo0", "hi0", "lo1", "hi1")] == [32, 39, 16, 23]
    assert sorted(loads[:, F["pid"]].tolist()) == list(range(6))
    assert torch.equal(log.element_counts("a"), torch.ones((40, 24), dtype=torch.int32))


def test_tensor_descriptors_are_recorded(kernels):
    a = arena()
    src = make_input(a, (20, 16), torch.float32, "a")
    with record_access(a, {"a": src}) as rec, guard_allocations(a):
        out = torch.empty((20, 16))
        kernels.descriptor_copy[(3,)](src, out, 20, 16, src.stride(0), BM=8, BN=16)
    log = rec.log()
    torch.testing.assert_close(out, src)
    assert log.loaded[0] == 320 and log.outside() == {}  # the rows past 20 are masked off
    assert sum(log.stored[1:]) == 320


def test_block_pointers_are_recorded(kernels):
    from triton.runtime.interpreter import InterpreterBuilder

    if not hasattr(InterpreterBuilder, "create_tensor_pointer_load"):
        pytest.skip("this Triton has no block pointers (removed in 3.9 for tensor descriptors)")
    a = arena()
    src = make_input(a, (20, 16), torch.float32, "a")
    with record_access(a, {"a": src}) as rec, guard_allocations(a):
        out = torch.empty((20, 16))
        kernels.block_ptr_copy[(3,)](src, out, 20, 16, src.stride(0), src.stride(1), BM=8, BN=16)
    log = rec.log()
    torch.testing.assert_close(out, src)
    assert log.loaded[0] == 320 and log.outside() == {}
    assert sum(log.stored[1:]) == 320


def test_atomics_count_as_a_load_and_a_store_and_tensors_outside_the_arena_are_named(kernels):
    a = arena()
    x = make_input(a, (100,), torch.float32, "x")
    out = torch.zeros(1)  # not guarded: outside the arena and outside guard_allocations
    with record_access(a, {"x": x}) as rec:
        kernels.total[(4,)](x, out, 100, BLOCK=32)
    log = rec.log()
    torch.testing.assert_close(out, x.sum().reshape(1), rtol=1e-5, atol=1e-5)
    i = log.index("out_ptr of total")
    assert i >= 0 and log.regions[i]["role"] == "scratch"
    assert log.loaded[i] == 100 and log.stored[i] == 100 and int(log.reads[i][0]) == 100
    assert (log.records[:, F["kind"]] == ATOMIC).sum() == 4


def test_an_output_cast_from_a_buffer_summed_by_atomics_is_written(kernels):
    """dQ summed into a float32 buffer by atomic adds, then cast on the host: the atomics write the buffer, the cast
    reads it and writes the output (torch's kernel on a GPU), so the output is written once, not 0.0x."""
    a = arena()
    x = make_input(a, (100,), torch.float32, "x")
    with record_access(a, {"x": x}) as rec, guard_allocations(a):
        summed = torch.zeros(100)
        out = torch.empty(100, dtype=torch.float16)
        for _ in range(2):  # two programs' shares of every element, as two key blocks add into dQ
            kernels.add_into[(4,)](x, summed, 100, BLOCK=32)
        out.copy_(summed)
        rec.note_copy(summed, out)
    rec.name_outputs([out], ["dq"])
    lines = traffic_lines(rec.log())
    assert "dq                      written 1.0x — minimum 1.0x" in lines, lines
    assert "scratch (100,) float32  read 3.0x — minimum 0.0x" in lines, lines  # two atomic adds and the cast
    assert "scratch (100,) float32  written 2.0x — minimum 0.0x" in lines, lines


def test_masked_off_lanes_read_poison_where_a_gpu_leaves_them_undefined(kernels):
    """A load with a mask and no `other=` (and a block pointer's with `boundary_check` and no `padding_option`, the same
    load on a GPU) reads NaN, or INT_POISON's low bytes, in the lanes its mask leaves out; `other=`, a padding option
    and a tensor descriptor (the hardware zero-fills) keep their zeros; the access log names the line of each such
    load; outside the recorder the interpreter reads 0 there, as it always does."""
    from checks.engine.access.patches import INT_POISON

    x, xi, a = torch.arange(1.0, 6.0), torch.arange(5, dtype=torch.int32), torch.ones(3, 4)
    outs = {name: torch.ones(8) for name in ("poison", "other", "unrecorded")}
    out_int, tiles = torch.zeros(8, dtype=torch.int32), {name: torch.ones(4, 8) for name in ("bare", "pad", "desc")}
    with record_access() as rec:
        kernels.spill[(1,)](x, outs["poison"], 5, BLOCK=8, OTHER=False)
        kernels.spill[(1,)](x, outs["other"], 5, BLOCK=8, OTHER=True)
        kernels.spill[(1,)](xi, out_int, 5, BLOCK=8, OTHER=False)
        kernels.block_ptr_spill[(1,)](a, tiles["bare"], 3, 4, BM=4, BN=8, PAD=False)
        kernels.block_ptr_spill[(1,)](a, tiles["pad"], 3, 4, BM=4, BN=8, PAD=True)
        kernels.descriptor_spill[(1,)](a, tiles["desc"], 3, 4, BM=4, BN=8)
    kernels.spill[(1,)](x, outs["unrecorded"], 5, BLOCK=8, OTHER=False)
    assert torch.equal(outs["poison"][:5], x) and bool(torch.isnan(outs["poison"][5:]).all())
    assert torch.equal(outs["other"][5:], torch.zeros(3)) and torch.equal(outs["unrecorded"][5:], torch.zeros(3))
    assert out_int[5:].tolist() == [INT_POISON & 0xFFFFFFFF] * 3 == [0x5A5A5A5A] * 3  # int32: its low four bytes
    assert bool(torch.isnan(tiles["bare"][3]).all() and torch.isnan(tiles["bare"][:, 4:]).all())
    for name in ("pad", "desc"):
        assert torch.equal(tiles[name], torch.nn.functional.pad(a, (0, 4, 0, 1))), name
    sites = rec.log().masked_poison
    assert [(site["kernel"], site["lanes"]) for site in sites] == [("spill", 6), ("block_ptr_spill", 20)], sites
    assert all(site["line"] > 0 for site in sites)


def test_two_programs_storing_one_element_are_a_race_or_a_collision(kernels):
    """A load-add-store of one element by two programs of a launch is a race, two programs storing different values
    there a write collision (and the load of what the other stored an unordered read), each named with its programs,
    element and line, although the interpreter computes the right sum; atomics, one value stored by both, and elements
    of one program each are none."""
    x = torch.arange(16.0)
    found = {}
    for how in ("add", "store", "atomic", "same", "own"):
        out = torch.zeros(16)
        with record_access() as rec:
            kernels.shared_add[(2,)](x, out, BLOCK=8, HOW=how)
        found[how] = rec.log().races
    add = [(f["kind"], f["programs"], f["index"]) for f in found["add"]]
    assert add == [("read", [0, 1], [0]), ("race", [0, 1], [0])], add
    assert [(f["kind"], f["programs"], f["index"]) for f in found["store"]] == [("collision", [0, 1], [0])]
    assert found["add"][0]["line"] > 0 and found["add"][0]["kernel"] == "shared_add"
    assert found["atomic"] == found["same"] == found["own"] == []


def test_atomics_order_programs_only_where_a_gpu_would(kernels):
    """An exchange of different values by two programs is a write collision, as two stores are; a compare-and-swap
    does not excuse later stores; a load of what another program stored is an unordered read unless an atomic orders
    the two (a lock taken and released, a counter the last program reads; a relaxed counter orders nothing)."""
    x = torch.arange(16.0)
    found = {}
    for how in ("xchg", "cas_then_store", "lock", "read", "counter", "relaxed"):
        out, part, sync = torch.zeros(8), torch.zeros(16), torch.zeros(1, dtype=torch.int32)
        with record_access() as rec:
            kernels.shared_by_atomics[(2,)](x, out, part, sync, BLOCK=8, HOW=how)
        found[how] = [(f["kind"], f["programs"], f["index"]) for f in rec.log().races]
        if how in ("lock", "counter", "relaxed"):  # what the interpreter computes is right in every case
            torch.testing.assert_close(out, x[:8] + x[8:])
    assert found["xchg"] == found["cas_then_store"] == [("collision", [0, 1], [0])], found
    assert found["read"] == [("read", [0, 1], [0])] and found["relaxed"] == [("read", [0, 1], [0])], found
    assert found["lock"] == found["counter"] == [], found


def test_a_load_ordered_by_atomics_is_noted_and_only_a_real_order_survives_the_programs_reversed(kernels):
    """A load of what another program stored, ordered by atomics as the interpreter ran them, is noted (`ordered`) for
    the replay's second run; run with the programs last to first, a lock and a counter the last program reads still
    give the right values, and an atomic whose value the loading program never looks at does not."""
    x = torch.arange(1.0, 17.0)
    for how in ("lock", "counter", "unread"):
        noted = {}
        for order in ("as run", "reversed"):
            out, part, sync = torch.zeros(8), torch.zeros(16), torch.zeros(1, dtype=torch.int32)
            with contextlib.ExitStack() as stack:
                rec = stack.enter_context(record_access())
                if order == "reversed":
                    stack.enter_context(programs_reversed())
                kernels.shared_by_atomics[(2,)](x, out, part, sync, BLOCK=8, HOW=how)
            noted[order] = [(f["kind"], f["programs"]) for f in rec.log().ordered_reads]
            right = bool(torch.equal(out, x[:8] + x[8:]))
            assert right == (order == "as run" or how != "unread"), (how, order, out)
            assert rec.log().races == [], (how, order)
        backwards = [] if how == "unread" else [("ordered", [1, 0])]  # unread: program 1 loads before 0 stores
        assert noted == {"as run": [("ordered", [0, 1])], "reversed": backwards}, (how, noted)


@pytest.mark.slow  # 300 programs twice in the interpreter
def test_a_ticket_is_no_order_when_the_programs_are_interleaved_at_their_atomics(kernels):
    """Run with every program paused after its first atomic and then going on last to first (`programs_interleaved`),
    the program that draws the last ticket merges before the other has stored: wrong there, though right as run and
    reversed; a counter the last program reads and a lock give the right values in every order."""
    x = torch.arange(1.0, 17.0)
    orders = {"as run": contextlib.nullcontext, "reversed": programs_reversed, "interleaved": programs_interleaved}
    right = {}
    for how in ("ticket", "counter", "lock"):
        for order, around in orders.items():
            out, part, sync = torch.zeros(8), torch.full((16,), float("nan")), torch.zeros(2, dtype=torch.int32)
            with around():
                kernels.shared_by_atomics[(2,)](x, out, part, sync, BLOCK=8, HOW=how)
            right[how, order] = bool(torch.equal(out, x[:8] + x[8:]))
    wrong = [key for key, ok in right.items() if not ok]
    assert wrong == [("ticket", "interleaved")], right
    many = 300  # more programs than run in threads at once; "padded_ticket" draws its tickets behind 64 others
    assert many > interleaving.THREAD_LIMIT
    x = torch.arange(1.0, 8.0 * many + 1)
    for how in ("ticket", "padded_ticket", "counter"):
        out, part, sync = torch.zeros(8), torch.full((8 * many,), float("nan")), torch.zeros(2, dtype=torch.int32)
        with programs_interleaved():
            kernels.shared_by_atomics[(many,)](x, out, part, sync, BLOCK=8, HOW=how)
        assert bool(torch.equal(out, x[:8] + x[8:16])) == (how == "counter"), (how, out)


def test_interleaved_programs_that_wait_for_each_other_finish_and_a_failure_is_raised(kernels):
    """A program spinning on a lock that a program paused earlier holds gives way to it, one reading a flag (with
    volatile loads or plain ones) to the program that sets it (as the interpreter runs them, program 0 would wait for
    program 1 forever), and each of a chain of flags to the one before it: the runs end, right. An error in one
    program ends the launch with that error, not a hang."""
    x = torch.arange(1.0, 65.0)
    out, part, sync = torch.zeros(8), torch.zeros(64), torch.zeros(2, dtype=torch.int32)
    with programs_interleaved():
        kernels.shared_by_atomics[(8,)](x, out, part, sync, BLOCK=8, HOW="lock")
    torch.testing.assert_close(out, x.view(8, 8).sum(0))
    for how in ("flag", "plain_flag"):  # read with volatile loads, and with plain ones
        out, sync = torch.zeros(8), torch.zeros(2, dtype=torch.int32)
        with programs_interleaved():
            kernels.shared_by_atomics[(2,)](x, out, part, sync, BLOCK=8, HOW=how)
        torch.testing.assert_close(out, x[:8] + x[8:16])
    out, part, sync = torch.zeros(8), torch.zeros(64), torch.zeros(8, dtype=torch.int32)
    with programs_interleaved():  # a chain of flags, each program waiting for the one before it (stream-K's fix-up)
        kernels.shared_by_atomics[(8,)](x, out, part, sync, BLOCK=8, HOW="chain")
    torch.testing.assert_close(out, x.view(8, 8).sum(0))
    with programs_interleaved(), pytest.raises(Exception, match="power of 2"):
        kernels.shared_by_atomics[(4,)](x, out, part, sync, BLOCK=6, HOW="lock")  # arange of 6: not a power of two


def test_an_interleaved_run_that_never_ends_is_left_at_its_time_and_leaves_no_program_running(kernels):
    """Every program waiting for a flag nobody sets: the replay's time limit ends the run (as `rerun` is ended), and
    no program's thread is left behind."""
    import threading
    import time

    from checks.engine.replay.replay_job import interleaved_within

    x, out, part, sync = torch.ones(32), torch.zeros(8), torch.zeros(32), torch.zeros(2, dtype=torch.int32)
    started = time.perf_counter()
    with pytest.raises(Exception, match="TooLong"), interleaved_within(0.5):
        kernels.shared_by_atomics[(4,)](x, out, part, sync, BLOCK=8, HOW="forever")
    assert time.perf_counter() - started < 5
    time.sleep(0.2)
    assert not [t.name for t in threading.enumerate() if t.name.startswith("program ")]


def test_atomics_into_memory_no_kernel_wrote_are_noted_with_their_line(kernels):
    """An atomic add into a `torch.empty` allocation finds the grader's poison there (a buffer left to an
    autotuner's reset_to_zero that never ran): the log notes its kernel and line; into torch.zeros, nothing."""
    a = arena()
    x = make_input(a, (100,), torch.float32, "x")
    found = {}
    for made in ("empty", "zeros"):
        with record_access(a, {"x": x}) as rec, guard_allocations(a):
            summed = getattr(torch, made)(100)
            kernels.add_into[(4,)](x, summed, 100, BLOCK=32)
        found[made] = rec.log().atomics_on_poison
    assert [(site["kernel"], site["line"] > 0) for site in found["empty"]] == [("add_into", True)], found
    assert found["zeros"] == []


def test_triton_interpreter_methods_still_exist():
    """The recorder patches these by name; a Triton release that renames them must fail here."""
    from triton.runtime import interpreter

    for name in ("create_masked_load", "create_masked_store", "create_atomic_rmw", "create_atomic_cas",
                 "set_grid_dim", "create_descriptor_load", "create_descriptor_store"):  # fmt: skip
        assert hasattr(interpreter.InterpreterBuilder, name), name
    assert "__call__" in vars(interpreter.GridExecutor)


def test_traffic_lines_compare_with_the_answer_key(kernels):
    log, _, _ = vector_add(kernels)
    wide = AccessLog.from_dict(log.to_dict())
    wide.loaded = [lanes * 32 for lanes in wide.loaded]
    lines = traffic_lines(wide, log)
    assert "x    read 32.0x — answer key 1.0x, minimum 1.0x" in lines
    assert "out  written 1.0x — answer key 1.0x, minimum 1.0x" in lines
    assert lines[-1] == "programs: 4 in 1 launch — answer key 4 in 1 launch"
    assert traffic_lines(log)[0] == "x    read 1.0x — minimum 1.0x"
    short = AccessLog.from_dict(log.to_dict())
    short.stored = [lanes * 4 // 5 for lanes in short.stored]
    assert "out  written 0.8x — answer key 1.0x, minimum 1.0x: below the minimum, so part of out is never written" in (
        traffic_lines(short, log)
    )


def elementwise_log(n: int, block: int, written: int | None = None) -> dict:
    """A vector add's log: program p loads x and y and stores out over elements [p * block, (p + 1) * block)."""
    log = Log([region("x", (n,)), region("y", (n,)), region("out", (n,), "allocated")]).launch(
        "add", (n // block, 1, 1)
    )
    for pid in range(n // block):
        box = [(pid * block, (pid + 1) * block - 1)]
        log.access(LOAD, pid, "x", box).access(LOAD, pid, "y", box)
        if written is None or box[0][1] < written:
            log.access(STORE, pid, "out", box)
    return log.data()


def softmax_log(rows: int, cols: int, passes: int) -> dict:
    """A row softmax's log: program p reads row p `passes` times and stores it once."""
    log = Log([region("x", (rows, cols)), region("y", (rows, cols), "allocated")]).launch("softmax", (rows, 1, 1))
    for pid in range(rows):
        for _ in range(passes):
            log.access(LOAD, pid, "x", [(pid, pid), (0, cols - 1)])
        log.access(STORE, pid, "y", [(pid, pid), (0, cols - 1)])
    return log.data()


def drawn_titles(monkeypatch, number, mine: dict, key: dict | None, tmp_path) -> list[str]:
    """The title of every panel `maps.draw` drew, in order; a panel that raises fails the test (no note)."""
    from checks.learner import maps

    titles: list[str] = []

    def strictly(ax, panel, *args):
        panel(ax, *args)
        titles.append(ax.get_title())

    monkeypatch.setattr(maps, "_safely", strictly)
    recording = {"case": {"n": 1}, "scalars": {"causal": True}}
    png = maps.draw(
        number, {**recording, "log": mine}, None if key is None else {**recording, "log": key}, tmp_path / "m.png"
    )
    assert png.stat().st_size > 1000
    return titles


@pytest.mark.slow  # draws PNGs with matplotlib
def test_the_elementwise_map_shows_which_program_wrote_each_element_and_what_was_never_written(monkeypatch, tmp_path):
    mine, key = elementwise_log(64, 16, written=32), elementwise_log(64, 16)
    titles = drawn_titles(monkeypatch, 1, mine, key, tmp_path)
    assert len(titles) == 2
    assert titles[0].startswith("yours: the program that wrote each element of out (64,)")
    assert "2 programs" in titles[0] and "32 never written (grey)" in titles[0]
    assert titles[1].startswith("answer key:") and "4 programs" in titles[1] and "never written" not in titles[1]


@pytest.mark.slow  # draws PNGs with matplotlib
def test_the_softmax_map_shows_the_programs_and_how_often_each_element_was_read(monkeypatch, tmp_path):
    titles = drawn_titles(monkeypatch, 6, softmax_log(8, 32, passes=3), softmax_log(8, 32, passes=1), tmp_path)
    assert len(titles) == 4  # per side: who wrote y, then reads of x
    assert "the program that wrote each element of y (8, 32)" in titles[0] and "8 programs" in titles[0]
    assert "times each element of x was read" in titles[1] and "3.00 reads per element" in titles[1]
    assert "answer key" in titles[3] and "1.00 reads per element" in titles[3]


@pytest.mark.slow  # draws PNGs with matplotlib
def test_the_matmul_map_shows_the_tiles_in_launch_order_and_what_the_first_wave_loads(monkeypatch, tmp_path):
    grouped, row_major = matmul_log(128, 512, 32, "grouped"), matmul_log(128, 512, 32, "row-major")
    titles = drawn_titles(monkeypatch, 4, row_major, grouped, tmp_path)
    assert len(titles) == 2
    assert all("tiles of c in launch order (4 x 16 tiles of 32 x 32)" in title for title in titles)
    assert "load 1 tile(s) of a + 16 of b = 17" in titles[0]  # row-major: the first wave is one row of tiles
    assert "load 2 tile(s) of a + 8 of b = 10" in titles[1]  # grouped by 2 rows: a 2 x 8 block of tiles


@pytest.mark.slow  # draws PNGs with matplotlib
def test_the_attention_map_shows_the_tile_pairs_each_program_loads(monkeypatch, tmp_path):
    walks, skips = attention_log(64, 16, 16, skip=False), attention_log(64, 16, 16, skip=True)
    titles = drawn_titles(monkeypatch, 9, walks, skips, tmp_path)
    assert len(titles) == 2
    assert "fwd, a program per query block (a row each)" in titles[0]
    assert "16 (query, key) tile pairs loaded" in titles[0]  # every key block for every query block
    assert "10 (query, key) tile pairs loaded" in titles[1]  # the causal answer key stops at the diagonal


@pytest.mark.slow  # imports matplotlib
def test_a_panel_that_cannot_be_drawn_says_so_instead_of_failing():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from checks.learner import maps

    def broken(ax, log):
        raise IndexError("no such region")

    fig, ax = plt.subplots()
    maps._safely(ax, broken, None)
    assert [text.get_text() for text in ax.texts] == ["cannot draw this panel:\nIndexError: no such region"]
    plt.close(fig)


def test_each_puzzle_names_a_kind_of_map_the_maps_can_draw():
    from checks.learner import maps
    from checks.registry import get_puzzle, load_puzzles

    kinds = {maps.ELEMENTWISE, maps.SOFTMAX, maps.MATMUL, maps.ATTENTION, maps.DECODING}
    assert all(p.map_kind in kinds for p in load_puzzles())
    assert get_puzzle("10b").map_kind == get_puzzle(10).map_kind == maps.ATTENTION  # lettered steps too
    assert get_puzzle("10a").map_kind == maps.SOFTMAX


@pytest.mark.slow
@pytest.mark.parametrize("number", [2])
def test_map_command_records_in_its_own_process_and_writes_a_png(number, tmp_path, capsys):
    from checks.authoring.wrong import materialize
    from checks.learner.maps import main
    from checks.registry import get_puzzle

    edit = (
        Path(__file__).resolve().parent.parent / "solutions" / "wrong" / "02_matrix_add" / "grid_axes_swapped.edit.yaml"
    )
    wrong = materialize(get_puzzle(2), edit, tmp_path)
    assert main([str(number), "--file", str(wrong), "--out", str(tmp_path / "map.png")]) == 0
    printed = capsys.readouterr().out
    assert "out  written 0.7x — answer key 1.0x" in printed and "Access map saved to" in printed
    assert (tmp_path / "map.png").stat().st_size > 1000
    assert main(["99"]) == 2
    assert main(["1", "--out", str(tmp_path / "stub.png")]) == 2  # the notebook as handed out: the stub
    assert "still the stub" in capsys.readouterr().err


@pytest.mark.slow
def test_recording_example(tmp_path):
    """record_file is what the map's recording process runs: the answer key of puzzle 1, recorded."""
    code = textwrap.dedent(
        """
        from checks.engine.grading_process.recording import interpreter_setup, record_file
        from checks.registry import get_puzzle
        import torch, sys
        interpreter_setup()
        torch.save(record_file(1, get_puzzle(1).solution), sys.argv[1])
        """
    )
    import subprocess
    import sys

    out = tmp_path / "rec.pt"
    subprocess.run([sys.executable, "-c", code, str(out)], check=True, cwd=Path(__file__).resolve().parent.parent)
    data = torch.load(out, weights_only=True)
    log = AccessLog.from_dict(data["log"])
    assert log.per_element("x") == 1.0 and log.index("out") >= 0 and data["inputs"] == {"x": [3000], "y": [3000]}


def test_panels_that_compare_share_one_colour_scale():
    import numpy as np

    """Read 3 times beside read 2 times must not both be the top colour of their own scale."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from checks.learner.maps import share_colour_scales

    fig, axes = plt.subplots(2, 2, squeeze=False)
    axes[0][0].imshow(np.full((4, 4), 3.0), vmin=0, vmax=3.0)  # yours: every element read 3 times
    axes[0][1].imshow(np.full((4, 4), 2.0), vmin=0, vmax=2.0)  # the answer key: 2 times
    axes[1][0].imshow(np.arange(16.0).reshape(4, 4))
    axes[1][1].imshow(np.arange(4.0).reshape(2, 2))
    share_colour_scales(axes)
    assert axes[0][0].get_images()[0].get_clim() == axes[0][1].get_images()[0].get_clim() == (0, 3.0)
    assert axes[1][0].get_images()[0].get_clim() == axes[1][1].get_images()[0].get_clim() == (0, 15.0)
    plt.close(fig)
