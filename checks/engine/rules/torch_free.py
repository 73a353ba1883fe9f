"""The rule that the learner's wrapper computes nothing with torch (the contract's "launches only")."""

from __future__ import annotations

from checks.engine.observations import AUTOGRAD
from checks.engine.rules.problem import CaseContext, Problem

FURTHER = 5  # further distinct operations listed under the message


def torch_free(ctx: CaseContext, **params: object) -> Problem | None:
    """Fail when the learner's own code ran a torch operation other than allocation, views and copies."""
    # arithmetic first: a view recorded only because autograd watches its tensor says less
    ops = sorted(ctx.obs.torch_ops, key=lambda op: op.op.endswith(AUTOGRAD))
    if not ops:
        return None
    first = ops[0]
    message = (
        f"Your code computed with torch ({first.op} at {first.where}): do this arithmetic inside your kernel; "
        "the wrapper may only allocate, reshape, copy layouts and launch."
    )
    details: list[str] = []
    listed = {first.op}
    for op in ops[1:]:
        if op.op in listed:
            continue
        listed.add(op.op)
        if len(details) == FURTHER:
            details.append("... and more torch operations.")
            break
        details.append(f"Also {op.op} at {op.where}")
    return Problem(message, details)
