"""Record the learner's plan at the puzzle's largest sizes, where the data has no storage.

The recording process calls the learner's function once more, on `checks.puzzles.largest`'s inputs: float tensors
on torch's meta device (a shape, strides and a dtype: a KV cache of 2^32 elements costs nothing), the metadata real.
Nothing runs but the host code: its allocations are meta tensors too, and its launches are written down as in every
case (`checks.engine.record.plan_recorder`). The replay runs the programs at the ends of that plan's grids
(`checks.engine.replay.overflow`).
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable
from typing import Any

Explain = Callable[[BaseException, dict], tuple[str, list[str]]]  # (exception, names) -> (text, the learner's lines)


def record_largest(
    fn: Any, module: Any, puzzle: Any, device: str, names: dict, global_names: list[str], explain: Explain
) -> dict[str, Any]:
    """{"plan": the plan at the largest sizes} or {"raised": what the call raised, "where": its lines, as `explain`
    words them}; {} for a puzzle without largest sizes."""
    from checks.engine.contract.plan import returned_kind
    from checks.engine.record.plan_recorder import PlanRecorder, launches_recorded, recorded_globals
    from checks.puzzles.largest import largest_inputs

    inputs = largest_inputs(puzzle, device)
    if inputs is None:
        return {}
    recorder = PlanRecorder(inputs, names)
    try:
        with contextlib.redirect_stdout(io.StringIO()), recorder, launches_recorded(recorder):
            returned = fn(*inputs.values())
    except Exception as exc:  # noqa: BLE001 - what the call raised at these sizes is what the probe reports
        text, where = explain(exc, names)
        return {"raised": text, "where": where}
    if recorder.too_long is not None:
        return {"raised": "too many operations", "where": [recorder.too_long] if recorder.too_long else []}
    return {"plan": recorder.plan(returned, returned_kind(returned), recorded_globals(module, global_names))}
