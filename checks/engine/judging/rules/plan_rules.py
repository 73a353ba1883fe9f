"""Rules on the plan a learner's function recorded (found by `checks.engine.judging.plans` before the replay).

Each rule reads the finding attached to the observation, which names the rule by its `name`; the message was
written where it was found, in the terms of what was found.
"""

from __future__ import annotations

from checks.engine.judging.rules.declare import EVERY_CALL, Rule, rule
from checks.engine.judging.rules.problem import CaseContext, Problem


def _plan_rule(name: str, doc: str, checks: str, message: str, taught_in: str = "1") -> Rule:
    """The rule `name` (for every call, taught in puzzle `taught_in`): it reports the finding that
    `checks.engine.judging.plans` attached to the observation under its name; `doc` says what it checks."""

    def check(ctx: CaseContext) -> Problem | None:
        found = ctx.obs.plan_problem
        if not found or found.get("rule") != name:
            return None
        return Problem(str(found.get("message", "")), [str(d) for d in found.get("details", [])])

    check.__name__ = check.__qualname__ = name
    check.__doc__ = doc
    return rule(EVERY_CALL, checks=checks, message=message, taught_in=taught_in)(check)


kernel_calls = _plan_rule(
    "kernel_calls",
    "A kernel body calls something outside triton.language, the submission's kernels and a few builtins.",
    checks=(
        "a kernel body calls only `tl.*`, your other `@triton.jit` functions and a few builtins (`range`, `min`, "
        "`max`, ...): what Triton's compiler accepts"
    ),
    message="Replace what a kernel cannot call with a `tl.*` operation, or move that work out of the kernel.",
)

mma_waited = _plan_rule(
    "mma_waited",
    "No Gluon kernel reads an asynchronous warpgroup MMA's result before a wait retires it (from the kernel's text).",
    checks=(
        "a Gluon kernel reads the result of an asynchronous `warpgroup_mma` only after a `warpgroup_mma_wait` "
        "retires it (a wait with `num_outstanding=n` retires every product but the n issued last), decided from "
        "the kernel's text: the values a GPU shows cannot tell"
    ),
    message=(
        "Wait with `warpgroup_mma_wait(num_outstanding=..., deps=(...))` until the product is done before you read "
        "its result: the PTX ISA leaves the accumulator's registers undefined until then."
    ),
    taught_in="16b",
)

kernels_from_source = _plan_rule(
    "kernels_from_source",
    "Every launched kernel is a @triton.jit function of the submission's own source.",
    checks="every kernel your function launches is a `@triton.jit` function of the code you grade",
    message=(
        "Define every kernel you launch in the code you grade (your graded cell, or the file), and launch that one."
    ),
)

torch_free = _plan_rule(
    "torch_free",
    "Nothing the host computed from the data reaches a kernel or an output.",
    checks=(
        "nothing your host function computes from the data (with torch, numpy or Python) reaches a kernel or an "
        "output: it only allocates, takes views, copies layouts and launches"
    ),
    message="Do every computation on the data inside a kernel, and return tensors your kernels wrote.",
)

plan_from_shapes = _plan_rule(
    "plan_from_shapes",
    "The plan is the same on two draws of the case that differ only in the data values.",
    checks=(
        "what your function asks of the GPU (grids, arguments, allocations) depends on shapes, strides, dtypes and "
        "scalar or integer inputs, never on the values of the data"
    ),
    message=(
        "Compute grids, arguments and allocations from shapes, strides, dtypes and scalar or integer inputs only, "
        "and compute with the data only inside your kernels."
    ),
)
