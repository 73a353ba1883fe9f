"""The torch-free wrapper rule: the watcher (in-process, Triton's interpreter) and the rule on observations."""

from __future__ import annotations

import os

os.environ["TRITON_INTERPRET"] = "1"  # before any kernel is defined: these tests run on the CPU

import itertools
import textwrap
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

from checks.engine.child.launches import Tracker, guard_allocations, watch_launches
from checks.engine.child.machine import autotune_without_benchmarks
from checks.engine.child.torch_watch import ALLOWED, watch_torch
from checks.engine.memory import Arena
from checks.engine.observations import CaseObservation, TorchOp
from checks.engine.rules.problem import CaseContext
from checks.engine.rules.torch_free import torch_free
from checks.engine.submission import load_module
from checks.instructor.solutions import expectations
from checks.puzzles import spec_module
from checks.registry import ROOT, get_puzzle, load_puzzles
from tests.helpers import right_submissions, run_rule

autotune_without_benchmarks()
_names = itertools.count()


def context(ops: list[TorchOp]) -> CaseContext:
    return CaseContext(puzzle=None, case={}, inputs={}, expected=[], outputs=[], obs=CaseObservation(0, torch_ops=ops))


def load(path: Path) -> ModuleType:
    return load_module(path, f"torch_watch_learner_{next(_names)}")


# -- the rule, on hand-made observations ---------------------------------------------------------


def test_rule_passes_without_torch_ops():
    assert torch_free(context([])) is None


def test_rule_names_the_first_op_and_line_and_what_to_do():
    problem = run_rule("torch_free", context([TorchOp("aten.mm", "yours.py, line 12: c = a @ b")]))
    assert problem is not None
    assert problem.rule == "torch_free"
    assert "aten.mm" in problem.message and "yours.py, line 12: c = a @ b" in problem.message
    assert "inside your kernel" in problem.message
    assert "allocate, reshape, copy layouts and launch" in problem.message
    assert problem.details == []


def test_rule_lists_at_most_five_further_distinct_ops():
    ops = [TorchOp("aten.mm", "f.py, line 1: a @ b"), TorchOp("aten.mm", "f.py, line 2: b @ a")]
    ops += [TorchOp(f"aten.op{i}", f"f.py, line {i + 3}: x") for i in range(8)]
    problem = torch_free(context(ops))
    assert problem is not None
    also = [d for d in problem.details if d.startswith("Also")]
    assert len(also) == 5
    assert also[0] == "Also aten.op0 at f.py, line 3: x"
    assert not any("aten.mm" in d for d in problem.details)  # the first op is not repeated
    assert problem.details[-1].startswith("...")


def test_rule_puts_arithmetic_before_views_recorded_for_autograd():
    ops = [TorchOp("aten.transpose (autograd)", "f.py, line 4: k.t()"), TorchOp("aten.bmm", "f.py, line 4: q @ k.t()")]
    problem = torch_free(context(ops))
    assert problem is not None
    assert "aten.bmm" in problem.message
    assert problem.details == ["Also aten.transpose (autograd) at f.py, line 4: k.t()"]


def test_rule_reads_observations_sent_as_json():
    obs = CaseObservation.from_dict(CaseObservation(0, torch_ops=[TorchOp("aten.exp", "f.py, line 3")]).to_dict())
    ctx = context([])
    ctx.obs = obs
    problem = torch_free(ctx)
    assert problem is not None and "aten.exp" in problem.message


# -- the watcher flags a learner's torch arithmetic ----------------------------------------------

TOKEN_KERNEL = """
import torch
import triton
import triton.language as tl


@triton.jit
def token_kernel(out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.zeros((BLOCK,), tl.float32), mask=offs < n)
"""

FLAGGED = {
    "matmul": ("c = a @ b", "aten.mm"),
    "softmax": ("c = torch.softmax(a, dim=-1)", "aten._softmax"),
    "functional_softmax": ("c = torch.nn.functional.softmax(a, dim=-1)", "aten._softmax"),
    "sum": ("c = a.sum()", "aten.sum"),
    "times_two": ("c = a * 2", "aten.mul"),
    "in_place_add": ("c = a.clone()\n    c.add_(b)", "aten.add_"),
    "exp": ("c = torch.exp(a)", "aten.exp"),
    "out_argument": ("c = torch.empty_like(a)\n    torch.add(a, b, out=c)", "aten.add"),
    "setitem_of_sum": ("c = torch.empty_like(a)\n    c[:] = a + b", "aten.add"),
    "autograd_backward": (
        "w = a.clone().requires_grad_()\n    (w * b).sum().backward()\n    c = w.grad",
        "aten.mul",
    ),
    "autograd_grad_of_a_view": (
        "w = a.clone().requires_grad_()\n"
        "    (c,) = torch.autograd.grad(w.expand(3, *w.shape), w, torch.ones(3, *w.shape))",
        "aten.expand (autograd)",
    ),
    "compiled": ("c = torch.compile(lambda t: t.sin())(a)", "aten.sin"),
}


@pytest.mark.slow
@pytest.mark.parametrize(("code", "op"), FLAGGED.values(), ids=FLAGGED.keys())
def test_watcher_flags_torch_arithmetic(tmp_path, code, op):
    path = tmp_path / "learner.py"
    path.write_text(f"import torch\n\n\ndef wrapper(a, b):\n    {code}\n    return c\n", encoding="utf-8")
    fn = load(path).wrapper
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    with watch_torch({str(path)}) as watch:
        fn(a, b)
    assert watch.ops, f"nothing recorded for {code!r}"
    assert any(o.op == op for o in watch.ops), watch.ops
    first = next(o for o in watch.ops if o.op == op)
    assert first.where.startswith("learner.py, line "), first.where


def test_autograd_engine_ops_are_recorded_at_the_backward_line(tmp_path):
    path = tmp_path / "learner.py"
    path.write_text(
        "def wrapper(a):\n"
        "    w = a.clone().requires_grad_()\n"
        "    w.expand(2, *w.shape).backward(a.expand(2, *a.shape))\n"
        "    return w.grad\n",
        encoding="utf-8",
    )
    fn = load(path).wrapper
    with watch_torch({str(path)}) as watch:
        fn(torch.randn(3, 3))
    # expand's backward is a sum the autograd engine runs for the learner
    assert any(o.op == "aten.sum" and "line 3" in o.where for o in watch.ops), watch.ops


@pytest.mark.slow
def test_token_kernel_plus_torch_answer_is_flagged(tmp_path):
    path = tmp_path / "token.py"
    path.write_text(
        TOKEN_KERNEL
        + textwrap.dedent(
            """

            def matmul(a, b):
                c = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
                token_kernel[(1,)](c, c.numel(), BLOCK=16)
                return torch.mm(a.float(), b.float()).to(a.dtype)
            """
        ),
        encoding="utf-8",
    )
    fn = load(path).matmul
    a, b = torch.randn(5, 3, dtype=torch.float16), torch.randn(3, 4, dtype=torch.float16)
    from checks.engine.submission import earlier_answer_key

    before = earlier_answer_key(path)  # an answer key that builds on an earlier step's key runs that key's kernels
    files = {str(path.resolve())} | ({str(before.resolve())} if before else set())
    tracker = Tracker(files)
    with watch_launches(tracker), watch_torch({str(path): "token.py"}) as watch:
        fn(a, b)
    assert tracker.own_launches, "the token kernel did run"
    assert [o.op for o in watch.ops] == ["aten.mm"], watch.ops
    source = "return torch.mm(a.float(), b.float()).to(a.dtype)"
    line = [text.strip() for text in path.read_text(encoding="utf-8").splitlines()].index(source) + 1
    assert watch.ops[0].where == f"token.py, line {line}: {source}"


def test_allowed_wrapper_work_is_not_flagged(tmp_path):
    path = tmp_path / "wrapper.py"
    path.write_text(
        textwrap.dedent(
            """
            import torch


            def wrapper(a, b):
                out = torch.empty_like(a)
                z = torch.zeros((3, 4), device=a.device)
                f = torch.full((2,), float("-inf"))
                z.zero_()
                out.fill_(1.0)
                t = a.t().contiguous().reshape(-1).view(a.shape[1], a.shape[0])
                h = a.to(torch.float16).float().clone()
                out.copy_(b)
                idx = torch.arange(a.shape[0])
                n = int(a[0, 0].item() * 0) + a.numel() + a.stride(0)
                parts = a[None, 1:3, ::2].unsqueeze(-1).squeeze(-1).permute(0, 2, 1).expand(2, -1, -1)
                print(a)
                return out, z, f, t, h, idx, n, parts
            """
        ),
        encoding="utf-8",
    )
    fn = load(path).wrapper
    copies: list[tuple[torch.Tensor, torch.Tensor]] = []
    with watch_torch({str(path)}, on_copy=lambda s, r: copies.append((s, r))) as watch:
        fn(torch.randn(4, 3), torch.randn(4, 3))
    assert watch.ops == []
    assert len(copies) >= 4  # contiguous, to, float, clone, copy_


def test_other_files_are_never_blamed(tmp_path):
    mine, theirs = tmp_path / "mine.py", tmp_path / "theirs.py"
    theirs.write_text("def helper(a):\n    return a * 2\n", encoding="utf-8")
    mine.write_text("def wrapper(a, helper):\n    return helper(a)\n", encoding="utf-8")
    helper, fn = load(theirs).helper, load(mine).wrapper
    with watch_torch({str(mine)}) as watch:
        fn(torch.randn(3), helper)
    assert watch.ops == []


def test_allow_list_holds_no_arithmetic():
    names = {str(p) for p in ALLOWED}
    assert {"aten.empty", "aten.clone", "aten.copy_", "aten.view", "aten._to_copy"} <= names
    for op in ("mm", "add", "mul", "sum", "exp", "_softmax", "add_", "cat", "constant_pad_nd", "index", "bmm"):
        assert f"aten.{op}" not in names


# -- the watcher flags nothing in right answers, with the grader's own ops around them -------------

RIGHT = [pytest.param(p.number, p.solution, id=p.solution.stem) for p in load_puzzles() if p.ready]
RIGHT += [pytest.param(number, p, id=f"right/{p.stem}") for number, p in right_submissions()]


def run_watched(number: int, path: Path, case: int = 0) -> tuple[Any, Any, Tracker, list]:
    puzzle = get_puzzle(number)
    fn = getattr(load(path), puzzle.name)
    gen = torch.Generator(device="cpu")
    gen.manual_seed(0)
    arena = Arena("cpu", gen)
    inputs = spec_module(puzzle).make_inputs(puzzle.cases["cpu"][case], arena)
    from checks.engine.submission import earlier_answer_key

    before = earlier_answer_key(path)  # an answer key that builds on an earlier step's key runs that key's kernels
    files = {str(path.resolve())} | ({str(before.resolve())} if before else set())
    tracker = Tracker(files)
    copies: list = []
    with (
        watch_launches(tracker),
        guard_allocations(arena),
        watch_torch(files, on_copy=lambda s, r: copies.append((s, r))) as watch,
    ):
        fn(*inputs.values())
    return watch, inputs, tracker, copies


@pytest.mark.slow
@pytest.mark.parametrize(("number", "path"), RIGHT)
def test_right_answers_run_no_torch(number, path):
    watch, _, tracker, _ = run_watched(number, path)
    assert tracker.own_launches
    assert watch.ops == [], watch.ops


def test_layout_copies_of_inputs_are_reported():
    path = ROOT / "tests" / "submissions" / "right" / "02_contiguous_copies.py"
    watch, inputs, _, copies = run_watched(2, path, case=4)  # both inputs strided: both are copied
    assert watch.ops == []
    sources = {s.untyped_storage().data_ptr() for s, _ in copies}
    assert {t.untyped_storage().data_ptr() for t in inputs.values()} <= sources


TOKEN = [
    pytest.param(p.number, p.wrong_dir / "torch_plus_token_kernel.py", id=p.stem)
    for p in load_puzzles()
    if p.ready and (p.wrong_dir / "torch_plus_token_kernel.py").exists()
]


@pytest.mark.slow
@pytest.mark.parametrize(("number", "path"), TOKEN)
def test_known_wrong_token_kernels_are_caught_by_the_rule(number, path):
    watch, _, tracker, _ = run_watched(number, path)
    assert tracker.own_launches, "the token kernel runs, so only the torch rule can reject this"
    problem = run_rule("torch_free", context(watch.ops))
    assert problem is not None
    expected = expectations(path)
    assert any(e.rule == problem.rule and e.text.lower() in problem.message.lower() for e in expected), problem.message
    print(number, problem.message, *problem.details, sep="\n  ")
