"""The replay process's job (role replay): perform each case's plan with the submission's kernels, built from their
checked source, on inputs drawn here with values no other process knows, report each case as an observation
(`checks.engine.contract.protocol`), and, when the grader asks, time the submission beside the answer key and the
baseline (`checks.engine.replay.measure`). No line of the learner's host code runs here. Started by
`checks.engine.grading_process.main`, which hands it the job, its events writer, the machine and the answer key.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

import checks
from checks.engine.contract.protocol import (
    TIME_COMMAND,
    CaseStart,
    Events,
    Job,
    Machine,
    Observed,
    Refused,
    Timings,
    fresh_outputs_path,
    interleaved_outputs_path,
    outputs_path,
    reversed_outputs_path,
)
from checks.engine.phases import mark
from checks.engine.processes.hardening import REFUSED_EXIT, harden
from checks.engine.processes.sealing import grader_digest
from checks.engine.replay.perform import TimedReplay
from checks.registry import Case, Puzzle


class AnswerKey(Protocol):
    """What the replay needs of the answer key (`checks.engine.answer_key`, which stands beside the recording and the
    replay rooms and is handed to the replay by the process's entry, `checks.engine.grading_process.main`)."""

    def parameters_of(self, puzzle: Any) -> list[str]: ...

    def replayed_answer_key(
        self, puzzle: Any, parameters: list[str], device: str, workdir: Path, kept: dict[str, Any] | None = None
    ) -> TimedReplay: ...


def replay_job(job: Job, puzzle: Puzzle, events: Events, machine: Machine, workdir: Path, key: AnswerKey) -> int:
    """The replay process's job: check the grader's files, replay every case (`replay_all`), then prepare the timing
    and, if the grader asks, time the submission beside the answer key (`key`) and the baseline."""
    if job.grader_digest and grader_digest() != job.grader_digest:  # written to while the recording ran
        changed = "checks/, solutions/ or puzzles.yaml changed while it ran"
        events.send(Refused(f"changing the grader's files ({changed})"))
        return REFUSED_EXIT
    replayed = replay_all(job, puzzle, events, machine, workdir, key)
    if replayed is None:
        return 0
    # while the grader judges the cases, the untimed half of the timing: inputs, a first call of each side,
    # the graphs; the clock runs only if the grader asks (every case passed), and the grader does nothing beside it
    from checks.engine.replay.measure import TimingRun
    from checks.puzzles import spec_module

    try:  # the key's plan as the grader keeps it (no Python of the key runs here), else recorded here
        answer_key = key.replayed_answer_key(puzzle, key.parameters_of(puzzle), machine.device, workdir, job.key_plan)
        prepared: TimingRun | Exception = TimingRun(puzzle, spec_module(puzzle), replayed, answer_key, workdir)
    except Exception as exc:  # noqa: BLE001 - the grader's own error, reported only if the timing is asked for
        prepared = exc
    mark("timing prepared")
    if sys.stdin.readline().strip() == TIME_COMMAND:
        mark("timing asked")
        if isinstance(prepared, Exception):
            raise prepared
        raw = prepared.rounds()
        mark("timed")
        events.send(Timings(**raw))
    return 0


def replay_all(
    job: Job, puzzle: Puzzle, events: Events, machine: Machine, workdir: Path, key: AnswerKey
) -> TimedReplay | None:
    """Perform each case's plan with the kernels built from the submission's source, on inputs drawn here with
    values no other process knows; report each as an observation. The function that replays the timing plan (the
    answer key's parameters read through `key`)."""
    from checks.engine.contract.kernel_source import KernelSource
    from checks.engine.contract.observations import CaseObservation
    from checks.engine.replay.case_runner import Observer
    from checks.engine.replay.kernels import build
    from checks.engine.replay.perform import KeptState, Performer, Tuning
    from checks.puzzles import spec_module

    spec = spec_module(puzzle)
    source = job.kernel_source or KernelSource()
    plans = [r["plan"] for r in job.replays if "plan" in r] + ([job.timing_plan] if job.timing_plan else [])
    mark("replay job read")
    # a submission none of whose plans the grader accepted has nothing to build: each case reports why
    kernels, kernel_files = build(source, plans[0].get("globals", {}), workdir) if plans else ({}, {})
    mark("kernels built")
    # no Python of the submission runs here but its kernels, checked against the language; should one step out of
    # it, the audit hook refuses what it would need (processes, frames, ctypes, the grader's files, writes elsewhere)
    if machine.mode == "interpreter":  # sealed by the kernel too: it writes only in the check's folder (on a GPU,
        # Triton's compiler writes its cache and temporary files elsewhere: there the audit hook alone)
        from checks.engine.processes.landlock import seal

        seal([workdir])
    harden([], events.refusals(), read_only=[Path(checks.__file__).parent], kernel_files=list(kernel_files))
    observer = Observer(machine, {**job.names, **kernel_files}, workdir)
    interpret = machine.mode == "interpreter"
    cases = puzzle.cases.on(gpu=machine.mode == "gpu")
    selection = job.cases if job.cases is not None else list(range(len(cases)))
    kept = KeptState()  # what the submission keeps between calls goes from each replayed call to the next
    tuning = Tuning(job.alternative, job.chosen)  # which config of an autotuned launch the interpreter runs
    for index, replay in zip(selection, job.replays, strict=False):
        events.send(CaseStart(index))
        if "plan" in replay:
            plan = replay["plan"]
            performed: list[Performer] = []

            def perform(inputs: dict, arena: Any, on_copy: Any, plan: dict = plan, performed: list = performed) -> Any:
                performed.append(
                    Performer(plan, kernels, inputs, arena, machine.device, interpret, on_copy, kept, tuning=tuning)
                )
                return performed[-1].run()

            obs = observer.observe(
                perform, spec, cases[index], job.seed, index, outputs_path(workdir, index), job.data_seed + index
            )
            obs.kept_changed = performed[-1].kept_changed if performed else []
            obs.configs = performed[-1].configs_run if performed else []
            if obs.masked_poison and not obs.raised:
                obs.masked_poison = masked_poison_reached(
                    plan, kernels, spec, cases[index], job, index, machine, workdir, obs.masked_poison
                )
            if obs.ordered_by_atomics and not obs.raised:  # the same call with the programs last to first
                obs.reversed_outputs = rerun(
                    plan, kernels, spec, cases[index], job, index, machine, reversed_outputs_path(workdir, index),
                    guarded=True, around=functools.partial(reversed_within, 2 + 4 * obs.seconds),
                )  # fmt: skip
                obs.interleaved_outputs = rerun(  # and with them interleaved at their atomics
                    plan, kernels, spec, cases[index], job, index, machine, interleaved_outputs_path(workdir, index),
                    guarded=True, around=functools.partial(interleaved_within, 5 + 10 * obs.seconds),
                )  # fmt: skip
            if obs.kept_changed and not obs.raised:  # the same call from the state its kept tensors were made in
                obs.fresh_outputs = rerun(
                    plan, kernels, spec, cases[index], job, index, machine, fresh_outputs_path(workdir, index)
                )
            if replay.get("largest") and interpret and not obs.raised:  # checks.engine.replay.overflow
                from checks.engine.replay.overflow import largest_findings

                obs.overflow = largest_findings(replay["largest"], kernels, puzzle, kernel_files, tuning)
            obs.returned = plan.get("kind", "")
            obs.printed = str(replay.get("printed", ""))[-3000:]  # what the learner's code printed, recording
        else:
            obs = CaseObservation.from_dict({**replay["observation"], "index": index})
        events.send(obs)
        mark(f"case {index} replayed")
        if obs.stub or (obs.raised and machine.mode == "gpu"):
            break  # after a CUDA error the context may be unusable
    events.send(Observed())
    if job.timing_plan is None:
        return None
    return TimedReplay(job.timing_plan, kernels, key.parameters_of(puzzle), machine.device)


def rerun(
    plan: dict, kernels: dict, spec: Any, case: Case, job: Job, index: int, machine: Machine, path: Path,
    guarded: bool = False, around: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext,
) -> bool:  # fmt: skip
    """Perform a case's plan again on the same inputs, its kept tensors as they were made (a new `KeptState`), inside
    `around()` (with `guarded`, its allocations adopted into the case's arena, poisoned as in the first run), and save
    what it returns at `path`; whether that went through. The grader compares it with the first run or the reference:
    a call right from its kept tensors' first state and wrong from where the earlier calls left them is wrong because
    of them (`fresh_outputs_path`); a call wrong with its programs run last to first (`reversed_outputs_path`), or
    interleaved at their atomics (`interleaved_outputs_path`), depends on an order a GPU does not keep."""
    import torch

    from checks.engine.inputs import draw
    from checks.engine.replay.perform import KeptState, Performer, Tuning

    try:
        arena, inputs = draw(spec, case, job.seed, index, machine.device, job.data_seed + index)
        interpret = machine.mode == "interpreter"
        tuning = Tuning(job.alternative, job.chosen)
        performer = Performer(
            plan, kernels, inputs, arena if guarded else None, machine.device, interpret, None, KeptState(),
            tuning=tuning,
        )  # fmt: skip
        with around():
            outputs = performer.run()
        if machine.device == "cuda":
            torch.cuda.synchronize()
        torch.save([t if isinstance(t, torch.Tensor) else None for t in outputs], path)
        return True
    except Exception:  # noqa: BLE001 - without the second run the call is judged by its first alone
        return False


class TooLong(Exception):
    """A run went on past its time (`time_limit`)."""


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """The block, stopped by `TooLong` once it has run `seconds` (a timer's signal; the main thread only)."""
    import signal

    def too_long(signum: int, frame: Any) -> None:
        raise TooLong

    before = signal.signal(signal.SIGALRM, too_long)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)


@contextlib.contextmanager
def reversed_within(seconds: float) -> Iterator[None]:
    """The programs of every launch run last to first (`programs_reversed`), for at most `seconds`: a program that
    waits for a flag a later program sets waits forever when the interpreter runs that one after it (on a GPU it does
    not), and such a run is left, the call judged as the interpreter first ran it."""
    from checks.engine.access.patches import programs_reversed

    with time_limit(seconds), programs_reversed():
        yield


@contextlib.contextmanager
def interleaved_within(seconds: float) -> Iterator[None]:
    """The programs of every launch interleaved at their atomics (`programs_interleaved`), for at most `seconds`, as
    `reversed_within`: its hand-overs cost threads and turns that the interpreter's order does not take, so the replay
    gives it more time than that one (5 s + 10x the call's own)."""
    from checks.engine.access.interleaving import programs_interleaved

    with time_limit(seconds), programs_interleaved():
        yield


def masked_poison_reached(
    plan: dict, kernels: dict, spec: Any, case: Case, job: Job, index: int, machine: Machine, workdir: Path,
    suspects: list[dict],
) -> list[dict]:  # fmt: skip
    """Of the loads without `other=` whose masked-off lanes read poison (`suspects`, the call's `masked_poison`),
    those whose poison reached an output: the same call, on the same inputs with its kept tensors as they were made,
    with that load's lanes read as 0 and the others' still poisoned, leaves NaN out of some element where the call
    left NaN. Where no load does so alone, all of them when the call with every such lane read as 0 (the
    interpreter's own reading) does. [] when none does, or when a run fails."""
    import torch

    from checks.engine.access.patches import masked_lanes_poisoned
    from checks.engine.inputs import draw
    from checks.engine.replay.perform import KeptState, Performer

    try:
        poisoned = torch.load(outputs_path(workdir, index), weights_only=True)
    except Exception:  # noqa: BLE001 - without the call's outputs no cause is named
        return []

    def clears(spared: dict | None) -> bool:
        """Whether the call, with the lanes of `spared` (None: of every suspect) read as 0, has no NaN somewhere
        the poisoned call had NaN."""
        try:
            arena, inputs = draw(spec, case, job.seed, index, machine.device, job.data_seed + index)
            interpret = machine.mode == "interpreter"
            performer = Performer(plan, kernels, inputs, arena, machine.device, interpret, None, KeptState())
            if spared is None:
                zeroed = performer.run()
            else:
                with masked_lanes_poisoned((spared["function"], spared["line"])):
                    zeroed = performer.run()
        except Exception:  # noqa: BLE001 - without the second run no cause is named
            return False
        for mine, other in zip(poisoned, zeroed, strict=False):
            if isinstance(mine, torch.Tensor) and isinstance(other, torch.Tensor) and mine.shape == other.shape:
                if mine.is_floating_point() and bool((torch.isnan(mine) & ~torch.isnan(other.cpu())).any()):
                    return True
        return False

    reached = [site for site in suspects if clears(site)] if len(suspects) > 1 else []
    return reached or (suspects if clears(None) else [])


def import_for_replay() -> None:
    """Import every module of the grader's that a replay uses, each puzzle's inputs and reference included, before its
    job comes: nothing of the grader's is read from disk once the recording ran (which, unsealed, may have written
    there; the replay also compares the grader's files with their digest before it performs). The answer key's module,
    which stands beside this room, is imported beside this (`checks.engine.grading_process.main.preload_role`)."""
    import checks.engine.contract.kernel_source
    import checks.engine.contract.observations
    import checks.engine.inputs
    import checks.engine.replay.case_runner
    import checks.engine.replay.kernels
    import checks.engine.replay.measure
    import checks.engine.replay.overflow
    import checks.engine.replay.perform
    import checks.puzzles.largest  # noqa: F401
    from checks.puzzles import spec_module
    from checks.registry import load_puzzles

    for puzzle in load_puzzles():
        spec_module(puzzle)
