"""The recording process's job (role record): seal the process, load the submission and record its plan for every
selected case, on two draws of each, and at the timing size for a timed GPU check; each reported as an event
(`checks.engine.contract.protocol`). No kernel runs here: the plan is what the learner's function asked of the GPU,
written down (`checks.engine.record.plan_recorder`), and only a claim, which the replay makes true or not.
Started by `checks.engine.grading_process.main`, which hands it the job, its events writer and the machine.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import checks
from checks.engine.contract.protocol import (
    CasePlan,
    Events,
    Job,
    LoadError,
    Machine,
    Missing,
    Observed,
    TimingPlan,
)
from checks.engine.phases import mark
from checks.engine.processes.hardening import harden
from checks.registry import Case, Puzzle


def record_job(job: Job, puzzle: Puzzle, events: Events, machine: Machine, workdir: Path) -> int:
    """The recording process's job: seal the process, then record the submission's plans (`record_all`)."""
    # hardening (checks.engine.processes.hardening): the learner's code runs here, sealed: it writes only in
    # a folder of its own, starts no process, and stays off the grader's files and the replay that follows
    own = own_folder(Path(job.scratch) if job.scratch else workdir / f"recording-{os.getpid()}")
    if machine.mode == "gpu":
        from checks.engine.machine import warm_up_gpu

        try:
            warm_up_gpu()  # the CUDA context and Triton's launch helpers, made before the seal
        except Exception:  # noqa: BLE001 - the learner's calls meet any real problem with the GPU themselves
            pass
    from checks.engine.processes.landlock import seal

    seal([own])  # and by the kernel, whatever writes (C, mmap): checks.engine.processes.landlock
    harden([workdir], events.refusals(), read_only=[Path(checks.__file__).parent],
           own=list(job.names), writable=[own])  # fmt: skip
    from checks.engine.processes.no_processes import forbid_processes

    forbid_processes()  # and at the system calls: no fork, exec or clone of a process, by any path
    record_all(job, puzzle, events, machine, workdir)
    return 0


def record_all(job: Job, puzzle: Puzzle, events: Events, machine: Machine, workdir: Path) -> None:
    """Load the submission and record its plan for every selected case, on two draws of each (and, for a timed GPU
    check, at the timing size): what it asks of the GPU, never run here."""
    from checks.engine.learner_output import explain_exception
    from checks.engine.submission import EarlierStepError, load_module
    from checks.puzzles import spec_module

    spec = spec_module(puzzle)
    names = {str(Path(k).resolve()): v for k, v in job.names.items()}
    try:
        earlier = Path(job.earlier) if job.earlier else None
        label = job.names.get(str(earlier.resolve()), "") if earlier else ""
        module = load_module(Path(job.file), "submission", earlier=earlier, earlier_label=label)
    except EarlierStepError as exc:  # the code of the step this puzzle builds on does not load
        text, where = explain_exception(exc, names)
        events.send(LoadError(text, where, step=puzzle.builds_on))
        return
    except Exception as exc:  # noqa: BLE001 - a submission that does not load is an observation
        text, where = explain_exception(exc, names)
        events.send(LoadError(text, where))
        return
    mark("submission loaded")
    missing = [name for name in puzzle.defines if not callable(getattr(module, name, None))]
    if missing:
        events.send(Missing(missing))
        return
    fn = getattr(module, puzzle.name)
    cases = puzzle.cases.on(gpu=not job.interpret)  # the stage's; on a GPU machine both record on the GPU
    selection = job.cases if job.cases is not None else list(range(len(cases)))
    raised = False
    for index in selection:
        recorded = record_case(fn, module, spec, cases[index], job, index, machine, names)
        if job.interpret and index == 0 and recorded["plans"]:  # the largest sizes: checks.engine.record.largest
            from checks.engine.record.largest import record_largest

            recorded["largest"] = record_largest(fn, module, puzzle, machine.device, names, job.global_names,
                                                 explain_exception)  # fmt: skip
        events.send(CasePlan(index=index, **recorded))
        mark(f"case {index} recorded")
        if recorded["stub"]:
            break  # the stub says nothing more
        raised = raised or bool(recorded["raised"])  # the other cases still say which shapes raise
    else:
        if job.time_plan and puzzle.timing_case and not raised:
            recorded = record_case(fn, module, spec, puzzle.timing_case, job, 0, machine, names, draws=1)
            mark("timing plan recorded")
            events.send(TimingPlan(**recorded))
    events.send(Observed())


def record_case(
    fn: Any, module: Any, spec: Any, case: Case, job: Job, index: int, machine: Machine, names: dict, draws: int = 2
) -> dict[str, Any]:
    """The plans of one case on `draws` draws that differ only in the data values, or how the call failed."""
    import io

    from checks.engine.inputs import RECORDING_DRAWS, draw
    from checks.engine.learner_output import captured, explain_exception
    from checks.engine.record.plan_recorder import TOO_LONG, PlanTooLong
    from checks.engine.record.recorded_call import record_plan

    found: dict[str, Any] = {
        "plans": [],
        "raised": "",
        "raised_where": [],
        "stub": False,
        "printed": "",
        "seconds": 0.0,
    }
    printed = io.StringIO()
    for data_seed in RECORDING_DRAWS[:draws]:
        _, inputs = draw(spec, case, job.seed, index, machine.device, job.seed + index + data_seed)
        recorded = record_plan(fn, module, inputs, names, job.global_names, around=[captured(printed)])
        found["seconds"] = recorded.seconds
        found["printed"] = printed.getvalue()[-3000:]
        if isinstance(recorded.raised, NotImplementedError):
            found.update(raised=f"NotImplementedError ({recorded.raised})", stub=True)
            break
        if recorded.raised is not None:  # any error in learner code is what the case reports
            found["raised"], found["raised_where"] = explain_exception(recorded.raised, names)
            break
        if recorded.too_long is not None:  # refused even where the learner's code caught the error and went on
            found["raised"] = f"{PlanTooLong.__name__}: {TOO_LONG}"
            found["raised_where"] = [recorded.too_long] if recorded.too_long else []
            break
        found["plans"].append(recorded.plan)
    return found


def own_folder(folder: Path) -> Path:
    """The recording process's own folder (the grader's scratch folder for it), where alone it may write; its
    temporary files go there too."""
    import tempfile

    folder.mkdir(exist_ok=True)
    os.environ["TMPDIR"] = str(folder)
    tempfile.tempdir = None  # tempfile reads TMPDIR again
    return folder


def import_for_record() -> None:
    """Import what the recording of a job will need before the job comes."""
    import checks.engine.contract.plan
    import checks.engine.inputs
    import checks.engine.learner_output
    import checks.engine.record.largest
    import checks.engine.record.recorded_call
    import checks.engine.submission  # noqa: F401
    from checks.engine.record.plan_recorder import warm_up

    warm_up()
