"""The map's replay: a plan recorded for a map (`checks.engine.record.map_plan`) performed with the kernels built from
the submission's source, on the case's inputs drawn as the grader draws them, under the access recorder
(`checks.engine.access`): the log a map draws. No line of the learner's host code runs here. Called by the map's
process (`checks.engine.grading_process.recording`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from checks.engine.contract.kernel_source import KernelSource
from checks.registry import Puzzle


def replay_for_map(
    plan: dict[str, Any], source: KernelSource, puzzle: Puzzle, case_index: int, seed: int
) -> tuple[dict[str, Any], list[Any]]:
    """Perform `plan` on the puzzle's CPU case `case_index` (drawn with `seed`) under the access recorder: (the access
    log as a dict, the outputs)."""
    from checks.engine.access.patches import record_access
    from checks.engine.inputs import draw_case
    from checks.engine.replay.case_runner import copies_of_inputs
    from checks.engine.replay.kernels import build
    from checks.engine.replay.perform import Performer

    arena, inputs, names = draw_case(puzzle, case_index, seed)
    kernels, _ = build(source, plan["globals"], Path("map"))  # compiled from memory: the folder only names them
    with record_access(arena, inputs) as log:
        outputs = Performer(plan, kernels, inputs, arena, "cpu", True, copies_of_inputs(log, inputs)).run()
    log.name_outputs(outputs, names)
    return log.log().to_dict(), outputs
