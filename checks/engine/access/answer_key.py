"""Run one submission on one case in this process, under the access recorder, and return its log.

For the grading process (`checks.engine.child.main`) and the map command's child (`checks.learner.maps`): this runs
the learner's code, so call it only in a process that may die. It needs Triton's interpreter:
call `interpreter_setup()` before anything imports the submission.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch


def interpreter_setup() -> None:
    """Triton's CPU interpreter, with autotune taking its first config (no timing without a GPU)."""
    os.environ["TRITON_INTERPRET"] = "1"
    from checks.engine.child.machine import autotune_without_benchmarks, numpy_pitfall, numpy_shim

    autotune_without_benchmarks()
    import numpy
    import triton

    if numpy_pitfall(triton.__version__, numpy.__version__):
        numpy_shim()


def draw_case(number: int, case_index: int = 0, seed: int = 1) -> tuple[Any, dict[str, Any], list[str]]:
    """(arena, inputs, output names) of a puzzle's CPU case, drawn as the grader draws it."""
    from checks.engine.memory import Arena
    from checks.puzzles import spec_module
    from checks.registry import get_puzzle

    puzzle = get_puzzle(number)
    spec = spec_module(puzzle)
    case = puzzle.cases["cpu"][case_index]
    gen = torch.Generator(device="cpu")
    gen.manual_seed(seed + case_index)
    arena = Arena("cpu", gen)
    inputs = spec.make_inputs(case, arena)
    names = [e.name for e in spec.reference(inputs)]
    return arena, inputs, names


def record_call(fn: Any, arena: Any, inputs: dict[str, Any], names: list[str]) -> tuple[dict[str, Any], list[Any]]:
    """Call fn on the inputs under the recorder (allocations guarded); (log dict, outputs)."""
    from checks.engine.access.patches import record_access
    from checks.engine.child.launches import guard_allocations

    with record_access(arena, inputs) as recorder, guard_allocations(arena):
        returned = fn(*inputs.values())
    outputs = list(returned) if isinstance(returned, (tuple, list)) else [returned]
    recorder.name_outputs(outputs, names)
    return recorder.log().to_dict(), outputs


def record_file(number: int, path: Path, case_index: int = 0, seed: int = 1) -> dict[str, Any]:
    """Load a submission file and record it on one CPU case: {"puzzle", "case", "inputs", "log"}."""
    from checks.engine.submission import load_module
    from checks.registry import get_puzzle

    puzzle = get_puzzle(number)
    module = load_module(Path(path), f"recorded_{number}_{Path(path).stem}_{os.getpid()}")
    fn = getattr(module, puzzle.name)
    arena, inputs, names = draw_case(number, case_index, seed)
    log, _ = record_call(fn, arena, inputs, names)
    shapes = {k: list(v.shape) for k, v in inputs.items() if isinstance(v, torch.Tensor)}
    scalars = {k: v for k, v in inputs.items() if isinstance(v, (bool, int, float))}
    return {
        "puzzle": number,
        "case": dict(puzzle.cases["cpu"][case_index]),
        "inputs": shapes,
        "scalars": scalars,
        "log": log,
    }
