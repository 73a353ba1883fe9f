"""A grading process's entry and its role's dispatch: it reports what one submission does, case by case, never a
verdict.

Started by `checks.engine.processes.spawn` as
`python -m checks.engine.grading_process.main JOB.json EVENTS.jsonl [--preload MODE [ROLE]]` (with --preload, it
imports torch, Triton and what the job of ROLE will need before it waits for its token and job). It takes the token
and the job on standard input, sends the machine event, and hands the job to its role's room: the recording's
(`checks.engine.record.record_job`) or the replay's (`checks.engine.replay.replay_job`, with the answer key,
`checks.engine.answer_key`, which stands beside both rooms). Each writes its events through the protocol's one writer
(`checks.engine.contract.protocol.Events`) in the order the protocol accepts; an exception of the grader's own code
is sent as a grader_error. The grader, in a process that never ran the learner's code, decides.
"""

from __future__ import annotations

import faulthandler
import os
import sys
import traceback
from pathlib import Path

from checks.engine.contract.protocol import (
    PRELOAD_FLAG,
    RECORD,
    Environment,
    Events,
    GraderError,
    Job,
    Machine,
)
from checks.engine.machine import autotune_without_benchmarks, detect
from checks.engine.phases import mark


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    mark("process started")
    faulthandler.enable()  # a crash prints where each frame was, so the verdict can name the learner's line
    private()  # first: a process started ahead of its job waits with nothing of it reachable
    machine = None
    at = args.index(PRELOAD_FLAG) if PRELOAD_FLAG in args else -1
    if 0 <= at < len(args) - 1:  # started early: import torch and Triton while the job is written
        machine = detect(force_interpreter=args[at + 1] == "interpreter")
        preload_role(args[at + 2] if len(args) > at + 2 else RECORD, machine)
        mark("preloaded")
    token = sys.stdin.readline().strip()  # before any of the learner's code runs
    if not token:
        return 0  # started ahead of a check that never came (the grader left): nothing to do
    job = Job.from_json(sys.stdin.readline())  # on the pipe only the grader holds, never in a file
    mark("job taken")
    # the check's folder comes with the job, not on the command line: a recording process of the interpreter stage
    # and one of the GPU stage start alike, and nothing but the sizes of their cases tells them apart
    workdir = Path(job.workdir) if job.workdir else Path(args[0]).parent
    events = Events.open(workdir / f"events-{job.role}.jsonl", token)
    try:
        return observe_job(job, events, machine, workdir)
    except Exception:  # noqa: BLE001 - the grader's own code raised (the learner's calls are caught where made)
        events.send(GraderError(traceback.format_exc()))
        return 1


def observe_job(job: Job, events: Events, machine: Machine | None, workdir: Path) -> int:
    """Everything after the token: the machine, then the job of its role, in that role's room (the recording's,
    `checks.engine.record.record_job`; the replay's, `checks.engine.replay.replay_job`)."""
    if machine is None:  # the grader hands a prestarted process only a job of the mode it was started for
        machine = detect(force_interpreter=job.interpret and not (job.role == RECORD and job.record_on_gpu))
    events.send(machine)
    if machine.problem:
        events.send(Environment(machine.problem))
        return 0
    if machine.mode == "interpreter":
        autotune_without_benchmarks()
    from checks.registry import get_puzzle, with_method_cases

    puzzle = get_puzzle(job.puzzle)  # the one place a grading process turns the job's puzzle id into the puzzle
    puzzle = with_method_cases(puzzle, job.method_cases)
    if job.role == RECORD:
        from checks.engine.record.record_job import record_job

        return record_job(job, puzzle, events, machine, workdir)
    from checks.engine import answer_key  # beside both rooms: the replay times the key with it
    from checks.engine.replay.replay_job import replay_job

    return replay_job(job, puzzle, events, machine, workdir, answer_key)


def preload_role(role: str, machine: Machine) -> None:
    """Import what the job of `role` will need, read the registry and, on a GPU, make the CUDA context while the
    grader writes the job: a check waits for none of it."""
    import checks.puzzles  # noqa: F401
    from checks.registry import load_puzzles

    load_puzzles()
    if machine.mode == "gpu" and not machine.problem:
        from checks.engine.machine import warm_up_gpu

        try:
            warm_up_gpu()
        except Exception:  # noqa: BLE001 - the job says what is wrong with the GPU, in its own words
            pass
    import_for_role(role)


def import_for_role(role: str) -> None:
    """Import every module of the grader's that the job of `role` uses, before the job comes."""
    if role == RECORD:
        from checks.engine.record.record_job import import_for_record

        import_for_record()
    else:
        import checks.engine.answer_key  # noqa: F401 - the replay times the key with it
        from checks.engine.replay.replay_job import import_for_replay

        import_for_replay()


def private() -> None:
    """No other process of this user may read or write this one's memory or open its pipes (/proc/PID/fd):
    the grader's token and, in the replay, its job and the data it draws stay its own (Linux; a no-op elsewhere)."""
    import ctypes

    try:
        libc = ctypes.CDLL(None)
        libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
    except (OSError, AttributeError):
        pass


if __name__ == "__main__":
    from checks.engine.processes.sealing import end_with_parent

    end_with_parent()  # started by the grader: it ends when the grader does, however (a fork server's: fork_server)
    code = main()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(code)  # without Python's shutdown of torch's modules (half a second): the report is written
