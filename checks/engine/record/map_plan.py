"""The map's recording: one submission's plan on one CPU case, recorded as a check records it, on other data values
than the replay draws (`checks.engine.inputs.RECORDING_DRAWS`), with the kernels' source read from the submission's
files (after the code of the step it builds on). Called by the map's process
(`checks.engine.grading_process.recording`), which then replays the plan under the access recorder
(`checks.engine.replay.map_log`); like the recording process's job, this runs the learner's host code.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from checks.engine.contract.kernel_source import KernelSource
from checks.registry import Puzzle


def record_for_map(
    puzzle: Puzzle, path: Path, case_index: int, seed: int, earlier: Path | None = None
) -> tuple[dict[str, Any], KernelSource]:
    """Load the submission `path` (after `earlier`, the code of the step it builds on, if given) and record its plan on
    the puzzle's CPU case `case_index` (drawn with `seed`): (the plan, the kernels' source). A kernel outside the
    kernel language is a ValueError; what the learner's function raises, it raises."""
    from checks.engine.contract.kernel_source import extract
    from checks.engine.inputs import RECORDING_DRAWS, draw
    from checks.engine.record.recorded_call import record_plan
    from checks.engine.submission import earlier_answer_key, load_module
    from checks.puzzles import spec_module

    module = load_module(path, f"recorded_{puzzle.number}_{path.stem}_{os.getpid()}", earlier=earlier)
    fn = getattr(module, puzzle.name)
    step = earlier if earlier else earlier_answer_key(path)  # an answer key builds on its step's key
    paths = ([step] if step else []) + [path]
    source = extract([(str(p.resolve()), p.name, p.read_text(encoding="utf-8")) for p in paths])
    if source.problems:
        raise ValueError(f"a kernel uses what a Triton kernel cannot: {source.problems[0]}")
    case = puzzle.cases.cpu[case_index]
    _, recorded_on = draw(spec_module(puzzle), case, seed, case_index, "cpu", seed + case_index + RECORDING_DRAWS[0])
    return record_plan(fn, module, recorded_on, {}, source.global_names).complete(), source
