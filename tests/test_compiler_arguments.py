"""The interpreter passes a kernel's scalars as Triton's compiler specialises them (checks.engine.compiler_arguments):
one kernel text that asks what its arguments are takes the same branch in the interpreter as on a GPU."""

from __future__ import annotations

import pytest
import torch
import triton.language as tl
import triton.runtime.interpreter as interpreter
from triton._C.libtriton import native_specialize_impl
from triton.backends.compiler import BaseBackend

from checks.engine.compiler_arguments import compiler_arguments

# the scalars the probe is given, in its parameters' order; KEPT is in do_not_specialize
SCALARS = {"ONE": 1, "TWO": 2, "BIG": 2**40, "SCALE": 1.5, "FLAG": True, "KEPT": 1}
NEVER_SPECIALISED = ("KEPT",)


def _probe(out_ptr, ONE, TWO, BIG, SCALE, FLAG, KEPT):
    """out[i]: 1 where the i-th scalar reaches the kernel as a tensor (the branch a method could take), then the
    number of dimensions of each tensor among them."""
    if isinstance(ONE, tl.tensor):
        tl.store(out_ptr + 0, 1)
    if isinstance(TWO, tl.tensor):
        tl.store(out_ptr + 1, 1)
        tl.store(out_ptr + 6, len(TWO.shape) + 10)
    if isinstance(BIG, tl.tensor):
        tl.store(out_ptr + 2, 1)
    if isinstance(SCALE, tl.tensor):
        tl.store(out_ptr + 3, 1)
    if isinstance(FLAG, tl.tensor):
        tl.store(out_ptr + 4, 1)
    if isinstance(KEPT, tl.tensor):
        tl.store(out_ptr + 5, 1)
        tl.store(out_ptr + 7, len(KEPT.shape) + 10)


def compiler_branches() -> list[int]:
    """The branch each scalar takes where Triton's compiler types it: a tensor unless it specialises it into a constexpr
    (what `triton.runtime.jit`'s binder computes for a launch, with do_not_specialize)."""
    found = []
    for name, value in SCALARS.items():
        kind = native_specialize_impl(BaseBackend, value, False, name not in NEVER_SPECIALISED, True)[0]
        found.append(0 if kind == "constexpr" else 1)
    return found


def interpreted(**given: object) -> list[int]:
    kernel = interpreter.InterpretedFunction(_probe, do_not_specialize=list(NEVER_SPECIALISED))
    out = torch.zeros(8, dtype=torch.int32)
    kernel[(1,)](out, **{**SCALARS, **given})
    return out.tolist()


def test_the_interpreter_takes_the_branch_the_compiler_specialisation_implies(monkeypatch):
    monkeypatch.setattr(interpreter.InterpretedFunction, "run", interpreter.InterpretedFunction.run)  # put back after
    assert compiler_branches() == [0, 1, 1, 1, 1, 1], "Triton's compiler: an int equal to 1 is a constexpr"
    if getattr(interpreter.InterpretedFunction.run, "compiler_arguments", False):
        monkeypatch.setattr(interpreter.InterpretedFunction, "run", interpreter.InterpretedFunction.run.original)
    shipped = interpreted(FLAG=None)  # Triton's own interpreter cannot pass a bool (an int32 array of an int1 type)
    assert shipped[:4] == [1, 1, 1, 0] != compiler_branches()[:4], "it tells the two apart by a 1 and by a float"
    assert compiler_arguments()
    branches = interpreted()
    assert branches[:6] == compiler_branches(), branches
    assert branches[6:] == [10, 10], "an int the compiler does not specialise is a 0-d tensor, as on a GPU"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the GPU half needs a GPU; the CPU half is the test above")
def test_the_gpu_takes_the_branch_the_interpreter_takes():
    from triton.runtime.jit import JITFunction

    assert compiler_arguments()
    kernel = JITFunction(_probe, do_not_specialize=list(NEVER_SPECIALISED))
    out = torch.zeros(8, dtype=torch.int32, device="cuda")
    kernel[(1,)](out, *SCALARS.values())
    assert out.cpu().tolist() == interpreted()


def test_a_float_argument_computes_as_the_compilers_fp32_scalar():
    """A float arrives as the fp32 scalar the compiler makes of it: an fp16 block times it is fp32, as on a GPU."""

    def scaled(x_ptr, out_ptr, SCALE):
        x = tl.load(x_ptr + tl.arange(0, 4))
        y = x * SCALE
        tl.static_assert(y.dtype == tl.float32)
        tl.store(out_ptr + tl.arange(0, 4), y)

    assert compiler_arguments()
    x = torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float16)
    expected = x.float() * torch.tensor(0.1, dtype=torch.float32)
    out = torch.empty(4, dtype=torch.float32)
    interpreter.InterpretedFunction(scaled)[(1,)](x, out, 0.1)
    assert torch.equal(out, expected)
    if torch.cuda.is_available():  # the compiler's own answer, where there is one to ask
        from triton.runtime.jit import JITFunction

        out = torch.empty(4, dtype=torch.float32, device="cuda")
        JITFunction(scaled)[(1,)](x.cuda(), out, 0.1)
        assert torch.equal(out.cpu(), expected)
