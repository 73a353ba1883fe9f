"""Rules on the plan a learner's function recorded (found by `checks.engine.judging.plans` before the replay).

Each rule reads the finding attached to the observation; the message was written where it was found.
"""

from __future__ import annotations

from checks.engine.rules.problem import CaseContext, Problem


def _finding(ctx: CaseContext, rule: str) -> Problem | None:
    found = ctx.obs.plan_problem
    if not found or found.get("rule") != rule:
        return None
    return Problem(str(found.get("message", "")), [str(d) for d in found.get("details", [])])


def kernel_calls(ctx: CaseContext) -> Problem | None:
    """A kernel body calls something outside triton.language, the submission's kernels and a few builtins."""
    return _finding(ctx, "kernel_calls")


def kernels_from_source(ctx: CaseContext) -> Problem | None:
    """Every launched kernel is a @triton.jit function of the submission's own source."""
    return _finding(ctx, "kernels_from_source")


def torch_free(ctx: CaseContext) -> Problem | None:
    """Nothing the host computed from the data reaches a kernel or an output."""
    return _finding(ctx, "torch_free")


def plan_from_shapes(ctx: CaseContext) -> Problem | None:
    """The plan is the same on two draws of the case that differ only in the data values."""
    return _finding(ctx, "plan_from_shapes")
