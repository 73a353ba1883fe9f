"""Run one submission on one case in this process, under the access recorder, and return its log.

Run as `python -m checks.engine.child.recording NUMBER FILE CASE OUT` by `checks.engine.processes.access_recording`
(for a map, or the answer key's memory traffic): this runs the learner's code, so call it only in a process that
may die. It needs Triton's interpreter: call `interpreter_setup()` before anything imports the submission.
"""

from __future__ import annotations

import os
import sys
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


def record_call(fn: Any, arena: Any, inputs: dict[str, Any], names: list[str]) -> tuple[dict[str, Any], list[Any]]:
    """Call fn on the inputs under the recorder (allocations guarded); (log dict, outputs)."""
    from checks.engine.access.patches import record_access
    from checks.engine.child.case_runner import as_outputs
    from checks.engine.child.launches import guard_allocations

    with record_access(arena, inputs) as recorder, guard_allocations(arena):
        returned = fn(*inputs.values())
    outputs = as_outputs(returned)
    recorder.name_outputs(outputs, names)
    return recorder.log().to_dict(), outputs


def record_file(
    number: int, path: Path, case_index: int = 0, seed: int = 1, earlier: Path | None = None
) -> dict[str, Any]:
    """Load a submission file (after `earlier`, the code of the step it builds on, if given) and record it on one
    CPU case: {"puzzle", "case", "inputs", "log"}."""
    from checks.engine.inputs import draw_case
    from checks.engine.submission import load_module
    from checks.registry import get_puzzle

    puzzle = get_puzzle(number)
    module = load_module(Path(path), f"recorded_{number}_{Path(path).stem}_{os.getpid()}", earlier=earlier)
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


def main(argv: list[str] | None = None) -> int:
    """Record FILE on CASE of puzzle NUMBER into OUT (a torch file), after EARLIER (the step it builds on) if given."""
    number, path, case, out, *earlier = sys.argv[1:] if argv is None else argv
    interpreter_setup()
    torch.save(record_file(number, Path(path), int(case), earlier=Path(earlier[0]) if earlier else None), out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
