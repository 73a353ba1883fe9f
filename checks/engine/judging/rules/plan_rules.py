"""Rules on the plan a learner's function recorded (found by `checks.engine.judging.plans` before the replay).

Each rule reads the finding attached to the observation, which names the rule by its `name`; the message was
written where it was found, in the terms of what was found.
"""

from __future__ import annotations

from checks.engine.judging.rules.declare import EVERY_CALL, rule
from checks.engine.judging.rules.problem import CaseContext, Problem


def _finding(ctx: CaseContext, rule_name: str) -> Problem | None:
    found = ctx.obs.plan_problem
    if not found or found.get("rule") != rule_name:
        return None
    return Problem(str(found.get("message", "")), [str(d) for d in found.get("details", [])])


@rule(
    EVERY_CALL,
    checks=(
        "a kernel body calls only `tl.*`, your other `@triton.jit` functions and a few builtins (`range`, `min`, "
        "`max`, ...): what Triton's compiler accepts"
    ),
    message="Replace what a kernel cannot call with a `tl.*` operation, or move that work out of the kernel.",
    taught_in="1",
)
def kernel_calls(ctx: CaseContext) -> Problem | None:
    """A kernel body calls something outside triton.language, the submission's kernels and a few builtins."""
    return _finding(ctx, kernel_calls.name)


@rule(
    EVERY_CALL,
    checks="every kernel your function launches is a `@triton.jit` function of the code you grade",
    message=(
        "Define every kernel you launch in the code you grade (your graded cell, or the file), and launch that one."
    ),
    taught_in="1",
)
def kernels_from_source(ctx: CaseContext) -> Problem | None:
    """Every launched kernel is a @triton.jit function of the submission's own source."""
    return _finding(ctx, kernels_from_source.name)


@rule(
    EVERY_CALL,
    checks=(
        "nothing your host function computes from the data (with torch, numpy or Python) reaches a kernel or an "
        "output: it only allocates, takes views, copies layouts and launches"
    ),
    message="Do every computation on the data inside a kernel, and return tensors your kernels wrote.",
    taught_in="1",
)
def torch_free(ctx: CaseContext) -> Problem | None:
    """Nothing the host computed from the data reaches a kernel or an output."""
    return _finding(ctx, torch_free.name)


@rule(
    EVERY_CALL,
    checks=(
        "what your function asks of the GPU (grids, arguments, allocations) depends on shapes, strides, dtypes and "
        "scalar or integer inputs, never on the values of the data"
    ),
    message=(
        "Compute grids, arguments and allocations from shapes, strides, dtypes and scalar or integer inputs only, "
        "and compute with the data only inside your kernels."
    ),
    taught_in="1",
)
def plan_from_shapes(ctx: CaseContext) -> Problem | None:
    """The plan is the same on two draws of the case that differ only in the data values."""
    return _finding(ctx, plan_from_shapes.name)
