"""The map's process: its entry, its seal, and its two parts in their rooms: the log a map draws.

Run as `python -m checks.engine.grading_process.recording NUMBER FILE CASE OUT SEED [EARLIER]` by
`checks.engine.processes.access_recording` (for a map, or the answer key's memory traffic). As in a check, the learner's
function only records its plan, on other data values, in the recording room (`checks.engine.record.map_plan`), and the
kernels taken from the submission's source perform it under the access recorder in the replay room
(`checks.engine.replay.map_log`), so the map shows what the replay did. Both parts run in this one process, sealed
before either as a recording process is (`seal`). This runs the learner's code, so call it only in a process that may
die; a map is a picture, never a verdict. It needs Triton's interpreter: call `interpreter_setup()` before anything
imports the submission.
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
    from checks.engine.compiler_arguments import compiler_arguments
    from checks.engine.lean_interpreter import lean_interpreter
    from checks.engine.machine import autotune_without_benchmarks, numpy_pitfall, numpy_shim

    autotune_without_benchmarks()
    lean_interpreter()
    compiler_arguments()
    import numpy
    import triton

    if numpy_pitfall(triton.__version__, numpy.__version__):
        numpy_shim()


def record_file(
    number: int | str, path: Path, case_index: int = 0, seed: int = 1, earlier: Path | None = None
) -> dict[str, Any]:
    """Load a submission file (after `earlier`, the code of the step it builds on, if given), record its plan on one
    CPU case (`checks.engine.record.map_plan`) and replay it under the access recorder
    (`checks.engine.replay.map_log`): {"puzzle", "case", "seed", "inputs", "scalars", "log"}."""
    from checks.engine.inputs import draw_case
    from checks.engine.record.map_plan import record_for_map
    from checks.engine.replay.map_log import replay_for_map
    from checks.registry import get_puzzle

    puzzle = get_puzzle(number)
    plan, source = record_for_map(puzzle, Path(path), case_index, seed, Path(earlier) if earlier else None)
    log, _ = replay_for_map(plan, source, puzzle, case_index, seed)
    _, inputs, _ = draw_case(puzzle, case_index, seed)
    shapes = {k: list(v.shape) for k, v in inputs.items() if isinstance(v, torch.Tensor)}
    scalars = {k: v for k, v in inputs.items() if isinstance(v, (bool, int, float))}
    return {
        "puzzle": number,
        "case": puzzle.cases.cpu[case_index].given(),
        "seed": seed,
        "inputs": shapes,
        "scalars": scalars,
        "log": log,
    }


def seal(folder: Path, own: list[str]) -> None:
    """The learner's code runs here as in a recording process: sealed, it writes only in `folder` (the log's) and
    starts no process; a refusal ends the process, its reason on standard error."""
    import checks
    from checks.engine.processes.hardening import harden
    from checks.engine.processes.landlock import seal as seal_by_the_kernel

    seal_by_the_kernel([folder])  # whatever writes (C, mmap): checks.engine.processes.landlock

    def refused(reason: str) -> None:
        print(f"The grader refuses this: {reason}.", file=sys.stderr, flush=True)

    harden([], refused, read_only=[Path(checks.__file__).parent], own=own, writable=[folder])
    from checks.engine.processes.no_processes import forbid_processes

    forbid_processes()


def main(argv: list[str] | None = None) -> int:
    """Record FILE on CASE (drawn with SEED) of puzzle NUMBER into OUT (a torch file), after EARLIER (the step it builds
    on) if given."""
    number, path, case, out, seed, *earlier = sys.argv[1:] if argv is None else argv
    interpreter_setup()
    before = Path(earlier[0]) if earlier else None
    seal(Path(out).parent, [path, *earlier])
    torch.save(record_file(number, Path(path), int(case), int(seed), earlier=before), out)
    return 0


if __name__ == "__main__":
    from checks.engine.processes.sealing import end_with_parent

    end_with_parent()  # it ends when the grader does, however
    raise SystemExit(main())
