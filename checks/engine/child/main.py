"""The grading process: loads one submission and reports what it does, case by case; never a verdict.

Started by `checks.engine.processes.spawn` as
`python -m checks.engine.child.main JOB.json EVENTS.jsonl [--preload MODE]` (with --preload, it imports torch
and Triton for MODE before it waits for its token and job). It writes one JSON event per line to EVENTS in the
order `checks.engine.protocol` accepts, saves what each call returned to the files the protocol names, and,
when the grader asks on standard input, times the submission on a GPU (saving its outputs and the answer key's
at the timing size, which the grader compares). The grader, in a process that never ran
the learner's code, decides.
"""

from __future__ import annotations

import faulthandler
import json
import sys
import traceback
from pathlib import Path
from typing import Any

import checks
from checks.engine.child.hardening import event_writer, harden
from checks.engine.child.machine import autotune_without_benchmarks, detect
from checks.engine.protocol import PRELOAD_FLAG, TIME_COMMAND, Job, outputs_path


class Events:
    def __init__(self, path: str, token: str) -> None:
        self._f = open(path, "a", encoding="utf-8")
        self._token = token

    def emit(self, event: str, **data: Any) -> None:
        self._f.write(json.dumps({"event": event, **data, "token": self._token}) + "\n")
        self._f.flush()


def observe_all(job: Job, events: Events, machine: Any, workdir: Path) -> Any:
    """Load the submission and observe every selected case, then the kernels-off re-run; the function."""
    from checks.engine.child.case_runner import Observer, explain_exception
    from checks.engine.submission import EarlierStepError, load_module
    from checks.puzzles import spec_module
    from checks.registry import get_puzzle

    puzzle = get_puzzle(job.puzzle)
    spec = spec_module(puzzle)
    observer = Observer(machine, job.names, workdir)
    try:
        earlier = Path(job.earlier) if job.earlier else None
        label = job.names.get(str(earlier.resolve()), "") if earlier else ""
        module = load_module(Path(job.file), "submission", earlier=earlier, earlier_label=label)
    except EarlierStepError as exc:  # the code of the step this puzzle builds on does not load
        text, where = explain_exception(exc, observer.names)
        events.emit("load_error", text=text, where=where, step=puzzle.builds_on)
        return None
    except Exception as exc:  # noqa: BLE001 - a submission that does not load is an observation
        text, where = explain_exception(exc, observer.names)
        events.emit("load_error", text=text, where=where)
        return None
    missing = [name for name in puzzle.defines if not callable(getattr(module, name, None))]
    if missing:
        events.emit("missing", names=missing)
        return None
    fn = getattr(module, puzzle.name)
    cases = puzzle.cases["gpu" if machine.mode == "gpu" else "cpu"]
    selection = job.cases if job.cases is not None else list(range(len(cases)))
    for index in selection:
        events.emit("case_start", index=index)
        obs = observer.observe(fn, spec, cases[index], job.seed, index, outputs_path(workdir, index))
        events.emit("case", **obs.to_dict())
        if obs.stub or (obs.raised and machine.mode == "gpu"):
            events.emit("observed")
            return None  # the stub says nothing more; after a CUDA error the context may be unusable
    if selection and selection[0] == 0:
        off = observer.observe(fn, spec, cases[0], job.seed, 0, outputs_path(workdir, 0, True), skip=True)
        events.emit("kernels_off", **off.to_dict())
    events.emit("observed")
    return fn


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    faulthandler.enable()  # a crash prints where each frame was, so the verdict can name the learner's line
    machine = None
    if len(args) == 4 and args[2] == PRELOAD_FLAG:  # started early: import torch and Triton while the job is written
        machine = detect(force_interpreter=args[3] == "interpreter")
    token = sys.stdin.readline().strip()  # before any of the learner's code runs
    if not token:
        return 0  # started ahead of a check that never came (the grader left): nothing to do
    job = Job.from_json(Path(args[0]).read_text(encoding="utf-8"))
    events = Events(args[1], token)
    try:
        return observe_job(job, events, machine, Path(args[0]).parent, token)
    except Exception:  # noqa: BLE001 - the grader's own code raised (the learner's calls are caught where made)
        events.emit("grader_error", text=traceback.format_exc())
        return 1


def observe_job(job: Job, events: Events, machine: Any, workdir: Path, token: str) -> int:
    """Everything after the token: the machine, the audit hook, the submission's cases and its timing."""
    if machine is None:  # the grader hands a prestarted process only a job of the mode it was started for
        machine = detect(force_interpreter=job.interpret)
    events.emit(
        "machine",
        mode=machine.mode,
        device=machine.name,
        torch=machine.torch_version,
        triton=machine.triton_version,
        numpy=machine.numpy_version,
    )
    if machine.problem:
        events.emit("environment", problem=machine.problem)
        return 0
    if machine.mode == "interpreter":
        autotune_without_benchmarks()
    # hardening (checks.engine.child.hardening): refuse process creation, introspection, ctypes, the grader's files
    harden([workdir], event_writer(events._f, token), read_only=[Path(checks.__file__).parent], own=list(job.names))
    fn = observe_all(job, events, machine, workdir)
    if fn is not None and sys.stdin.readline().strip() == TIME_COMMAND:
        from checks.engine.child.measure import measure
        from checks.puzzles import spec_module
        from checks.registry import get_puzzle

        puzzle = get_puzzle(job.puzzle)
        events.emit("timings", **measure(puzzle, spec_module(puzzle), fn, job.solution_file, workdir))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
