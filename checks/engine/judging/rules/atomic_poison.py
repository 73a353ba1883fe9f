"""The cause of NaN that atomics put into an output: adds into a buffer no kernel had written.

`tl.atomic_add` adds into what the memory holds. A buffer made by `torch.empty` holds garbage on a GPU (the grader's
poison, NaN, here) until a kernel or the host writes it; an autotuner's `reset_to_zero` zeroes it only while the
autotuner benchmarks (the first call of each key of a kernel with several configs). The access log notes each
atomic that found the poison where it added (`AccessLog.atomics_on_poison`).
"""

from __future__ import annotations

from typing import Any

import torch

from checks.engine.access.log import AccessLog
from checks.engine.access.traffic import display_name
from checks.engine.judging.rules.problem import CaseContext


def atomics_on_unwritten_memory(ctx: CaseContext, exp: Any) -> str | None:
    """'your atomics at line N added into X where nothing had been written...' when the access log saw atomics add
    into the grader's poison and this output holds NaN; None otherwise."""
    if not ctx.obs.access:
        return None
    sites = AccessLog.from_dict(ctx.obs.access).atomics_on_poison
    index = next((i for i, e in enumerate(ctx.expected) if e is exp), None)
    yours = ctx.outputs[index] if index is not None and index < len(ctx.outputs) else None
    if not sites or not isinstance(yours, torch.Tensor) or not yours.is_floating_point():
        return None
    if not bool(torch.isnan(yours).any()):
        return None
    log = AccessLog.from_dict(ctx.obs.access)
    site = sites[0]
    r = int(site["region"])
    name = display_name(log.regions[r]) if 0 <= r < len(log.regions) else "a tensor you allocated"
    kernel, function = str(site.get("kernel", "")), str(site.get("function", ""))
    inside = f"`{kernel}`" + (f" (in `{function}`)" if function and function != kernel else "")
    return (
        f"the atomics at line {site['line']} of {inside} added into {name} where nothing had been written, so they "
        "added to the grader's poison (NaN; on a GPU, whatever the memory held). Make that buffer with torch.zeros "
        "(or store zeros into it first): an autotuner's reset_to_zero zeroes it only while the autotuner benchmarks "
        "its configs, on the first call of each key of a kernel with several configs."
    )
