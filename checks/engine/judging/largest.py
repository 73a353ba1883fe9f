"""The plan recorded at the puzzle's largest sizes, checked by the grader before the replay probes it
(`checks.engine.replay.overflow`; the rule that judges what the probe found is
`checks.engine.judging.rules.overflow.offsets_fit`)."""

from __future__ import annotations

from typing import Any

from checks.engine.contract.kernel_source import KernelSource
from checks.engine.contract.protocol import Tampered
from checks.engine.judging.plans import plan_problem


def replayed_largest(recorded: dict[str, Any], source: KernelSource) -> dict[str, Any]:
    """What the replay probes of the plan recorded at the largest sizes: the plan, or how the call raised there;
    {} when its plan breaks a rule of the plans (the cases' plans say so). Tampered for a malformed one."""
    if "raised" in recorded:
        return {"raised": str(recorded["raised"]), "where": [str(w) for w in recorded.get("where", [])]}
    plan = recorded.get("plan")
    if plan is None:
        return {}
    if not isinstance(plan, dict):
        raise Tampered("a plan at the largest sizes that is not a plan")
    return {} if plan_problem([plan], source) is not None else {"plan": plan}
