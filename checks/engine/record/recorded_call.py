"""One call of a host function recorded as a plan: the recorder set up, the function called on the inputs with its
launches written down (`checks.engine.record.plan_recorder`), the plan collected. Every plan is recorded here: a
case's in the recording process (`checks.engine.record.record_job`), the plan at the largest sizes
(`checks.engine.record.largest`), the map's (`checks.engine.record.map_plan`) and the answer key's
(`checks.engine.answer_key`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from checks.engine.contract.plan import returned_kind
from checks.engine.record.plan_recorder import (
    TOO_LONG,
    PlanRecorder,
    PlanTooLong,
    launches_recorded,
    recorded_globals,
)


@dataclass(frozen=True)
class RecordedCall:
    """What one recorded call left: its plan, or what it raised, or where it asked for more than a plan holds."""

    plan: dict[str, Any] | None  # None where the call raised or asked past OPS_LIMIT
    raised: Exception | None  # what the call raised (its traceback kept); None if it returned
    too_long: str | None  # where the call asked past OPS_LIMIT ("" outside the learner's files); None if it did not
    read_inputs: list[str]  # where the call read its inputs' values on the host: a plan that depends on the data
    seconds: float  # how long the call took

    def complete(self) -> dict[str, Any]:
        """The plan; else what the call raised, or PlanTooLong where it asked past OPS_LIMIT (even if it caught that
        error and went on)."""
        if self.raised is not None:
            raise self.raised
        if self.plan is None:
            raise PlanTooLong(TOO_LONG)
        return self.plan


def record_plan(
    fn: Callable[..., Any],
    module: Any,
    inputs: dict[str, Any],
    own_files: dict[str, str],
    global_names: Sequence[str],
    around: Sequence[AbstractContextManager[Any]] = (),
    this_thread_only: bool = False,
) -> RecordedCall:
    """Call `fn` on `inputs` (by parameter name, in order) with its launches written down, never run, and collect
    the plan with the module-level values its kernels read (`global_names` of `module`). `own_files`: the learner's
    files (resolved paths) and how messages name them. `around`: contexts entered, in order, outside the recorder
    for the call (what it prints, say). `this_thread_only`: only this thread's launches are written down (the
    grader's process records the answer key's plan in a thread of its own). An exception the call raises is
    returned as `raised`; one of collecting the plan is the grader's own, and raised."""
    recorder = PlanRecorder(inputs, own_files)
    start = time.perf_counter()
    try:
        with contextlib.ExitStack() as stack:
            for context in around:
                stack.enter_context(context)
            stack.enter_context(recorder)
            stack.enter_context(launches_recorded(recorder, this_thread_only=this_thread_only))
            returned = fn(*inputs.values())
    except Exception as exc:  # noqa: BLE001 - what the call raised is what its caller reports
        return RecordedCall(None, exc, recorder.too_long, list(recorder.read_inputs), time.perf_counter() - start)
    seconds = time.perf_counter() - start
    if recorder.too_long is not None:  # refused even where the caller's code caught the error and went on
        return RecordedCall(None, None, recorder.too_long, list(recorder.read_inputs), seconds)
    plan = recorder.plan(returned, returned_kind(returned), recorded_globals(module, list(global_names)))
    return RecordedCall(plan, None, None, list(recorder.read_inputs), seconds)
