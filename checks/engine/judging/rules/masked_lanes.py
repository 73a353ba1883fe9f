"""The cause of NaN that a load's masked-off lanes put into an output: a load with a mask and no `other=`.

On a GPU the lanes a load's mask leaves out hold whatever the registers held; Triton's interpreter reads 0 there,
so a kernel that lets those lanes reach its result (0 * garbage, a sum over them) passes on a CPU and is wrong on a
GPU. The grader's interpreter reads poison in them (NaN in floats, `checks.engine.access.patches`), and the replay
proves the cause before it is named: the same call with those lanes read as 0 has no NaN where yours has
(`CaseObservation.masked_poison`, kept only then).
"""

from __future__ import annotations

from typing import Any

import torch

from checks.engine.judging.rules.problem import CaseContext


def masked_load_without_other(ctx: CaseContext, exp: Any) -> str | None:
    """'A masked load without `other=` at line N read lanes outside the mask...' when the replay proved that the
    poison those lanes read reached this output's NaN; None otherwise."""
    sites = ctx.obs.masked_poison
    if not sites:
        return None
    index = next((i for i, e in enumerate(ctx.expected) if e is exp), None)
    yours = ctx.outputs[index] if index is not None and index < len(ctx.outputs) else None
    if not isinstance(yours, torch.Tensor) or not yours.is_floating_point() or not bool(torch.isnan(yours).any()):
        return None
    lines = [_where(site) for site in sites]
    first = lines[0] if len(lines) == 1 else ", ".join(lines[:-1]) + " and " + lines[-1]
    loads = "a masked load without `other=`" if len(lines) == 1 else "masked loads without `other=`"
    return (
        f"{loads} at {first} read lanes outside the mask, and what they read reached {exp.name}: on a GPU those "
        "lanes hold whatever the memory held (here NaN; the interpreter alone reads 0 there). Give the load "
        "`other=` (0.0 for a sum or a product, float('-inf') for a max), or keep those lanes out of the result."
    )


def _where(site: dict[str, Any]) -> str:
    kernel, function = str(site.get("kernel", "")), str(site.get("function", ""))
    inside = f"`{kernel}`" + (f" (in `{function}`)" if function and function != kernel else "")
    return f"line {site['line']} of {inside}" if site.get("line") else inside
