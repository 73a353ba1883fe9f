"""The rule `mma_waited`: no Gluon kernel reads an asynchronous warpgroup MMA's result before a wait retires it.

Decided from the kernel's text (`checks.engine.judging.mma_waits`), so it runs here, without a GPU: the Hopper keys
and the software-pipelined variant pass; each known-wrong kernel that names the rule is rejected with the lines of the
read and of the product; small kernels pin the model (products retire in issue order, a wait with num_outstanding=n
retires all but the n issued last) through loops, branches and calls; and the rule switched off in the rulebook lets
the known-wrong kernels' findings through.
"""

from __future__ import annotations

import pytest

from checks.authoring.wrong import known_wrong, name_of, source_of
from checks.engine.contract.kernel_source import extract
from checks.engine.contract.observations import CaseObservation
from checks.engine.judging.mma_waits import EarlyRead, first_early_read
from checks.engine.judging.plans import source_problem
from checks.engine.judging.rules.problem import CaseContext
from checks.instructor.solutions import expectations
from checks.registry import ROOT
from tests.helpers import HOPPER, run_rule, switch_off

RULE = "mma_waited"


def early_read(text: str, label: str = "mine.py") -> EarlyRead | None:
    source = extract([(label, label, text)])
    assert not source.problems, source.problems  # the kernels are in the language: only the waits are judged
    return first_early_read(source)


def line_of(text: str, marker: str) -> int:
    (number,) = [i for i, line in enumerate(text.splitlines(), start=1) if marker in line]
    return number


KEYS = [
    ROOT / "solutions" / "16a_tma_copy.py",
    ROOT / "solutions" / "16b_hopper_matmul.py",
    ROOT / "solutions" / "16_hopper_attention_fwd.py",
    ROOT / "solutions" / "variants" / "16_software_pipelined.py",
]


@pytest.mark.parametrize("path", KEYS, ids=lambda p: p.stem)
def test_the_hopper_keys_and_the_pipelined_variant_wait_before_every_read(path):
    text = path.read_text(encoding="utf-8")
    assert early_read(text, path.name) is None
    assert source_problem(extract([(path.name, path.name, text)])) is None


WRONG = [(p, f) for p in HOPPER for f in known_wrong(p) if RULE in {e.rule for e in expectations(f)}]
# (known-wrong kernel, the read's line, the product's line, the line it was called from or None)
LINES = {
    "accumulator_read_before_wait": ("c_tile.store(acc.to(", "acc = warpgroup_mma(a_tiles", None),
    "scores_read_before_wait": ("return gl.where(valid, s,", "s = warpgroup_mma(q_tile, k_tiles.index(slot)",
                                "s = _masked(s, j, "),
}  # fmt: skip


def test_each_hopper_step_with_asynchronous_products_has_a_known_wrong_kernel_for_the_rule():
    assert sorted(p.number for p, _ in WRONG) == ["16", "16b"]
    assert sorted(name_of(f) for _, f in WRONG) == sorted(LINES)


@pytest.mark.parametrize(("puzzle", "path"), WRONG, ids=[f"{p.number}-{name_of(f)}" for p, f in WRONG])
def test_a_known_wrong_kernel_is_rejected_with_the_lines_of_the_read_and_the_product(puzzle, path):
    text = source_of(puzzle, path)
    label = f"{name_of(path)}.py"
    found = early_read(text, label)
    read, issued, called = LINES[name_of(path)]
    assert found is not None and found.line == line_of(text, read) and found.issued[2] == line_of(text, issued)
    assert (found.called_at[1] if found.called_at else None) == (line_of(text, called) if called else None)
    problem = source_problem(extract([(label, label, text)]))
    assert problem["rule"] == RULE and problem["message"] == found.message()
    assert f"{label}, line {found.line}, in `{found.function}`" in found.message()
    assert f"warpgroup_mma at line {found.issued[2]}" in found.message()
    assert "warpgroup_mma_wait(num_outstanding=..., deps=(...))" in found.message()
    (expected,) = expectations(path)  # the `expect:` line `make solutions` checks on a Hopper GPU
    assert expected.rule == RULE and expected.text.lower() in found.message().lower()


def observed(problem: dict) -> CaseContext:
    obs = CaseObservation(index=0, returned="tensor", launches=[], buffers=[], plan_problem=problem)
    return CaseContext(HOPPER[1], None, {}, [], [], obs)


@pytest.mark.parametrize(("puzzle", "path"), WRONG, ids=[f"{p.number}-{name_of(f)}" for p, f in WRONG])
def test_switching_the_rule_off_lets_the_known_wrong_kernels_finding_through(puzzle, path, monkeypatch):
    label = f"{name_of(path)}.py"
    ctx = observed(source_problem(extract([(label, label, source_of(puzzle, path))])))
    problem = run_rule(RULE, ctx)
    assert problem is not None and problem.rule == RULE and f"{label}, line" in problem.message
    switch_off(monkeypatch, RULE)
    assert run_rule(RULE, ctx) is None


# -- small kernels: the model, through loops, branches and calls ---------------------------------------------------
HEADER = """\
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import warpgroup_mma, warpgroup_mma_wait


"""


def kernel(body: str, *helpers: str) -> str:
    head = "@gluon.jit\ndef _kernel(a_tiles, b_tiles, out_ptr, k_tiles, FLAG: gl.constexpr):\n"
    return HEADER + "".join(f"@gluon.jit\n{h}\n\n" for h in helpers) + head + body


def test_a_loop_that_waits_for_one_and_then_for_none_after_it_passes():
    text = kernel("""\
    acc = gl.zeros((128, 128), dtype=gl.float32)
    for k in range(k_tiles):
        acc = warpgroup_mma(a_tiles.index(k), b_tiles.index(k), acc, is_async=True)
        acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc,))
    acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
    gl.store(out_ptr, acc)
""")
    assert early_read(text) is None
    assert early_read(text.replace("    acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))\n", "")) is not None


def test_a_read_in_the_loop_after_a_wait_for_one_of_the_latest_product_fails():
    text = kernel("""\
    acc = gl.zeros((128, 128), dtype=gl.float32)
    for k in range(k_tiles):
        acc = warpgroup_mma(a_tiles.index(k), b_tiles.index(k), acc, is_async=True)  # issue
        acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc,))
        gl.store(out_ptr, acc)  # read
""")
    found = early_read(text)
    assert found is not None and (found.line, found.issued[2]) == (line_of(text, "# read"), line_of(text, "# issue"))
    assert found.function == "_kernel" and found.expression == "acc" and found.called_at is None


def test_an_if_path_that_skips_the_wait_fails_and_both_paths_waiting_pass():
    text = kernel("""\
    acc = warpgroup_mma(a_tiles.index(0), b_tiles.index(0), gl.zeros((128, 128), dtype=gl.float32), is_async=True)
    if FLAG:
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
    out = acc * 2.0  # read
    gl.store(out_ptr, out)
""")
    assert early_read(text).line == line_of(text, "# read")
    both = text.replace("    out = acc", "    else:\n        acc = warpgroup_mma_wait(0, (acc,))\n    out = acc")
    assert early_read(both) is None


def test_a_wait_retires_products_in_issue_order_whatever_its_deps_name():
    """Two products in flight, then a wait for one: the older is done (though the wait names the newer), the
    newer is not."""
    text = kernel("""\
    zeros = gl.zeros((128, 128), dtype=gl.float32)
    s = warpgroup_mma(a_tiles.index(0), b_tiles.index(0), zeros, use_acc=False, is_async=True)
    o = warpgroup_mma(a_tiles.index(1), b_tiles.index(1), zeros, use_acc=False, is_async=True)  # newer
    o = warpgroup_mma_wait(num_outstanding=1, deps=(o,))
    gl.store(out_ptr, s)
    gl.store(out_ptr, o.to(gl.float16))  # read
""")
    found = early_read(text)
    assert (found.line, found.expression, found.issued[2]) == (line_of(text, "# read"), "o", line_of(text, "# newer"))


def test_a_helper_that_waits_inside_passes_and_one_that_reads_a_product_in_flight_fails():
    step = """\
def _step(a, b, acc, k):
    acc = warpgroup_mma(a.index(k), b.index(k), acc, is_async=True)
    return warpgroup_mma_wait(num_outstanding=0, deps=(acc,))"""
    reads = """\
def _scaled(x):
    return x * 0.5  # read in the helper"""
    issue = """\
def _issue(a, b, acc, k):
    return warpgroup_mma(a.index(k), b.index(k), acc, is_async=True)  # issued in a helper"""
    body = """\
    acc = gl.zeros((128, 128), dtype=gl.float32)
    for k in range(k_tiles):
        acc = _step(a_tiles, b_tiles, acc, k)
    acc = _issue(a_tiles, b_tiles, acc, 0)
    WAIT
    gl.store(out_ptr, _scaled(acc))  # the call
"""
    waited = kernel(body.replace("WAIT", "acc = warpgroup_mma_wait(0, deps=(acc,))"), step, reads, issue)
    assert early_read(waited) is None
    text = kernel(body.replace("WAIT", "pass"), step, reads, issue)
    found = early_read(text)
    assert (found.function, found.line, found.expression) == ("_scaled", line_of(text, "# read in the helper"), "x")
    assert found.issued[1:] == ("_issue", line_of(text, "# issued in a helper"))
    assert found.called_at == ("_kernel", line_of(text, "# the call"))
    message = found.message()
    assert "in `_scaled` (called at line" in message and "of `_issue`" in message
    waits_for_the_caller = step.replace("acc = warpgroup_mma(a.index(k), b.index(k), acc, is_async=True)", "pass")
    assert early_read(kernel(body.replace("WAIT", "acc = _step(a_tiles, b_tiles, acc, 1)"), waits_for_the_caller,
                             reads, issue)) is None  # fmt: skip  # the helper's wait retires the caller's product


def test_names_do_not_matter_only_the_calls_and_metadata_is_no_read():
    text = kernel("""\
    acc = mma(a_tiles.index(0), b_tiles.index(0), gl.zeros((128, 128), dtype=gl.float32), is_async=True)
    zeros = gl.zeros(acc.shape, dtype=acc.dtype)
    acc = hopper.warpgroup_mma_wait(num_outstanding=0, deps=[acc])
    gl.store(out_ptr, acc + zeros)
""").replace(
        "from triton.experimental.gluon.language.nvidia.hopper import warpgroup_mma, warpgroup_mma_wait",
        "from triton.experimental.gluon.language.nvidia import hopper\n"
        "from triton.experimental.gluon.language.nvidia.hopper import warpgroup_mma as mma",
    )
    assert early_read(text) is None
    assert early_read(text.replace("deps=[acc])", "deps=[acc])\n    gl.store(out_ptr, zeros)")) is None
    assert early_read(text.replace("num_outstanding=0", "num_outstanding=1")).expression == "acc"


def test_what_the_text_does_not_say_is_taken_the_side_that_rejects_and_the_message_says_so():
    text = kernel("""\
    acc = warpgroup_mma(a_tiles.index(0), b_tiles.index(0), gl.zeros((128, 128), dtype=gl.float32), is_async=FLAG)
    acc = warpgroup_mma_wait(num_outstanding=k_tiles, deps=(acc,))
    gl.store(out_ptr, acc)
""")
    message = early_read(text).message()
    assert "is_async at line" in message and "taken as True" in message
    assert "num_outstanding at line" in message and "retire no product" in message
    passed = kernel(
        """\
    _run(a_tiles, b_tiles, out_ptr, warpgroup_mma)
""",
        """\
def _run(a, b, out_ptr, f):
    acc = f(a.index(0), b.index(0), gl.zeros((128, 128), dtype=gl.float32), is_async=True)
    gl.store(out_ptr, acc)  # read through a function passed in""",
    )
    found = early_read(passed)
    assert found.function == "_run" and found.line == line_of(passed, "# read through a function passed in")
    unknown = passed.replace("    _run(a_tiles, b_tiles, out_ptr, warpgroup_mma)\n", "    pass\n").replace(
        "def _kernel(", "def _other(f, a, b):\n    f(a, b)\n\n\n@gluon.jit\ndef _kernel("
    )
    found = early_read(unknown)
    assert found.unfollowed and "cannot follow" in found.message() and found.function in ("_run", "_other")


def test_a_while_loop_carries_a_product_in_flight_to_its_next_pass():
    text = kernel("""\
    acc = gl.zeros((128, 128), dtype=gl.float32)
    k = 0
    while k < k_tiles:
        total = gl.sum(acc, 0)  # read
        acc = warpgroup_mma(a_tiles.index(k), b_tiles.index(k), acc, is_async=True)  # issue
        k += 1
    gl.store(out_ptr, total)
""")
    found = early_read(text)
    assert (found.line, found.issued[2]) == (line_of(text, "# read"), line_of(text, "# issue"))


def test_a_kernel_the_analysis_cannot_follow_is_refused_with_its_line_never_passed_nor_crashed():
    deep = kernel("    x = " + " + ".join(["k_tiles"] * 600) + "\n")  # parsed, but deeper than the walk goes
    found = early_read(deep)
    assert found.unfollowed and "cannot follow expressions nested this deep" in found.message()
    recursive = kernel("    _again(a_tiles)\n", "def _again(a):\n    _again(a)  # itself")
    found = early_read(recursive)
    assert found.line == line_of(recursive, "# itself") and "from inside itself" in found.message()
    assert early_read(kernel("    break\n")) is None  # Python refuses it when it compiles the kernel
