"""Record one submission's plan on one case and replay it under the access recorder: the log a map draws.

Run as `python -m checks.engine.grading_process.recording NUMBER FILE CASE OUT` by
`checks.engine.processes.access_recording` (for a map, or the answer key's memory traffic). As in a check, the learner's
function only records its plan (on other data values) and the kernels taken from the submission's source perform it
(`checks.engine.replay`), so the map shows what the replay did. This runs the learner's code, so call it only in a
process that may die; a map is a picture, never a verdict. It needs Triton's interpreter: call `interpreter_setup()`
before anything imports the submission.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import torch

from checks.registry import Puzzle


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


def record_call(
    module: Any, fn: Any, paths: list[Path], puzzle: Puzzle, case_index: int, seed: int
) -> tuple[dict[str, Any], list[Any]]:
    """Record fn's plan on the case (other data values), replay it under the access recorder; (log dict, outputs)."""
    from checks.engine.access.patches import record_access
    from checks.engine.contract.kernel_source import extract
    from checks.engine.contract.plan import returned_kind
    from checks.engine.inputs import RECORDING_DRAWS, draw, draw_case
    from checks.engine.record.plan_recorder import PlanRecorder, launches_recorded, recorded_globals
    from checks.engine.replay.case_runner import copies_of_inputs
    from checks.engine.replay.kernels import build
    from checks.engine.replay.perform import Performer
    from checks.puzzles import spec_module

    case = puzzle.cases.cpu[case_index]
    source = extract([(str(p.resolve()), p.name, p.read_text(encoding="utf-8")) for p in paths])
    if source.problems:
        raise ValueError(f"a kernel uses what a Triton kernel cannot: {source.problems[0]}")
    _, recorded_on = draw(spec_module(puzzle), case, seed, case_index, "cpu", seed + case_index + RECORDING_DRAWS[0])
    recorder = PlanRecorder(recorded_on, {})
    with recorder, launches_recorded(recorder):
        returned = fn(*recorded_on.values())
    plan = recorder.plan(returned, returned_kind(returned), recorded_globals(module, source.global_names))
    arena, inputs, names = draw_case(puzzle, case_index, seed)
    kernels, _ = build(source, plan["globals"], Path("map"))  # compiled from memory: the folder only names them
    with record_access(arena, inputs) as log:
        outputs = Performer(plan, kernels, inputs, arena, "cpu", True, copies_of_inputs(log, inputs)).run()
    log.name_outputs(outputs, names)
    return log.log().to_dict(), outputs


def record_file(
    number: int, path: Path, case_index: int = 0, seed: int = 1, earlier: Path | None = None
) -> dict[str, Any]:
    """Load a submission file (after `earlier`, the code of the step it builds on, if given) and record it on one
    CPU case: {"puzzle", "case", "inputs", "log"}."""
    from checks.engine.inputs import draw_case
    from checks.engine.submission import earlier_answer_key, load_module
    from checks.registry import get_puzzle

    puzzle = get_puzzle(number)
    module = load_module(Path(path), f"recorded_{number}_{Path(path).stem}_{os.getpid()}", earlier=earlier)
    fn = getattr(module, puzzle.name)
    step = Path(earlier) if earlier else earlier_answer_key(Path(path))  # an answer key builds on its step's key
    paths = ([step] if step else []) + [Path(path)]
    log, _ = record_call(module, fn, paths, puzzle, case_index, seed)
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
