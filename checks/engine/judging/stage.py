"""One stage of grading: run the grading process, judge each observation as it comes, and give the verdict.

The grading process observes; this module, in the grader's process, judges: `Stage.run` loops over the
events the process reports and hands each to the judge, then gives the verdict. A report that breaks
the protocol, ends before it is complete, or cannot be read is never a pass; `checks.engine.judging.wording`
words the verdicts the rules do not.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from checks import verdict as V
from checks.engine.access.traffic import answer_key_log, traffic_lines
from checks.engine.contract.kernel_source import KernelSource, extract
from checks.engine.contract.observations import CaseObservation
from checks.engine.contract.plan import method_alternatives
from checks.engine.contract.protocol import (
    RECORD,
    REPLAY,
    TIME_COMMAND,
    CasePlan,
    Event,
    Job,
    Machine,
    Observed,
    RecordStream,
    Stream,
    Tampered,
    TimingPlan,
    Timings,
)
from checks.engine.inputs import debugging_data_seed, secret_data_seed
from checks.engine.judging.judge import Judge, load_timing_outputs
from checks.engine.judging.largest import replayed_largest
from checks.engine.judging.plans import plan_problem
from checks.engine.judging.rules import rulebook
from checks.engine.judging.timing import from_measurement
from checks.engine.judging.wording import (
    RULE_FAILED_SUMMARY,
    TAMPERED_SUMMARY,
    cause_over_cases,
    earlier_step_advice,
    earlier_stub_summary,
    ending_verdict,
    failure_pattern,
    grader_error_verdict,
    map_advice,
    unfinished_verdict,
    without_fault_dump,
)
from checks.engine.phases import mark
from checks.engine.processes.prestart import take_prestarted
from checks.engine.processes.run import GradingProcess, ProcessEnd
from checks.engine.processes.spawn import kill, start_grading_process
from checks.registry import Puzzle

Progress = Callable[[dict[str, Any]], None]


class Stage:
    """Grades one submission in one mode (GPU or interpreter) through one grading process."""

    def __init__(
        self,
        puzzle: Puzzle,
        job: Job,
        mode: str,
        workdir: Path,
        time_it: bool = False,
        artifacts: Path | None = None,
        progress: Progress | None = None,
        first_failure: bool = False,
        file: str = "",
    ) -> None:
        """`first_failure`: stop at the first failing case (known-wrong kernels, whose first failure is the point);
        `file`: the file graded as the learner named it, repeated in every command the verdict suggests."""
        self.puzzle, self.job, self.workdir, self.file = puzzle, job, workdir, file
        self.first_failure, self.stopped_early = first_failure, False
        cases = puzzle.cases.on(gpu=mode == "gpu")
        self.selection = job.cases if job.cases is not None else list(range(len(cases)))
        self.stream = Stream(self.selection)
        self.judge = Judge(puzzle, job.seed, mode, workdir, artifacts)
        self.time_it = time_it and mode == "gpu"
        self.progress = progress
        self.results: list[V.CaseResult] = []
        self.launched: dict[int, set[str]] = {}  # case index -> the kernels its replay launched
        self.tampered = ""
        self.rule_failed = ""  # a rule that raised: the grader's own error
        self.timeout = 0.0
        self.kernel_files: dict[str, str] = {}  # the replay's name of each file of kernels -> how messages name it
        self.timing_problem = ""  # why the timing size has no plan to replay (the learner's code raised there)
        self.replayed = False  # the replay process took its job
        # asked once every case has passed, before the timing: whether to time (the interpreter stage beside a GPU
        # stage passed), so that a submission failing anywhere is never timed
        self.before_timing: Callable[[], bool] | None = None
        # the answer key's plan at the timing size as the grader's process keeps it (checks.engine.answer_key.KeptPlan:
        # `ready()`, `settle()`); None: the replay records the key's plan itself
        self.key_plan: Any = None
        # the traffic of case 1 beside the answer key's: in the verdict, or (an interpreter stage beside a GPU stage)
        # added by the caller once the GPU's timing is done, so that the verdict never waits for the key's log
        self.traffic_later = False
        # the autotuned launches' configs the replay ran ({"kernel", "config"}: replay.perform.ran_config),
        # and the most distinct configs one of the recorded plans' autotuned launches has (contract.plan)
        self.configs_run: list[dict[str, Any]] = []
        self.alternatives = 1
        self.timing_kernels: list[str] = []  # the kernels the plan at the timing size launches
        self.recorded_as: tuple[RecordStream, ProcessEnd, KernelSource, Job] | None = None  # for `replay_again`
        self._stop = threading.Event()

    def run(self, timeout: float) -> V.Verdict:
        """Record the plans (the learner's code runs, in a process of its own), then, once that process and all
        it started are gone, replay them in a process that runs none of the learner's host code, and judge."""
        self.timeout = timeout
        start = time.monotonic()
        mark(f"stage {self.judge.device} started")
        source = kernel_source(self.job)  # read before any of the learner's code runs
        recording = RecordStream(self.selection)
        record_job = replace(self.job, role=RECORD, global_names=source.global_names, time_plan=self.time_it)
        process = GradingProcess(record_job, recording, timeout, self.workdir, stop=self._stop.is_set)
        # the replay process imports torch and Triton while the learner's code records; it takes its job only
        # from a pipe the grader holds, and nothing of it is reachable from another process
        # (grading_process.main.private)
        replayer = take_prestarted(self.workdir, self.job.interpret, REPLAY)
        replayer = replayer or start_grading_process(self.workdir, self.job.interpret, preload=True, role=REPLAY)
        try:
            try:
                for _ in process.events():
                    pass
            except BaseException:  # Ctrl-C, or the grader's own error: the learner's code must not run on without it
                process.end()
                raise
            end = process.end()
            mark("recording process ended")
            self.recorded_as = (recording, end, source, record_job)
            return self.replay(recording, end, source, record_job, replayer, timeout - (time.monotonic() - start))
        finally:
            if replayer.poll() is None and not self.replayed:
                kill(replayer)

    def replay_again(self, first: Stage, timeout: float) -> V.Verdict:
        """Replay the plans the stage `first` recorded (the learner's code does not run again) with this stage's choice
        of autotuner configs (`Job.alternative`, `Job.chosen`), and judge."""
        recording, end, source, record_job = first.recorded_as
        record_job = replace(record_job, alternative=self.job.alternative, chosen=self.job.chosen)
        replayer = start_grading_process(self.workdir, self.job.interpret, preload=True, role=REPLAY)
        try:
            return self.replay(recording, end, source, record_job, replayer, timeout)
        finally:
            if replayer.poll() is None and not self.replayed:
                kill(replayer)

    def replay(
        self,
        recording: RecordStream,
        end: ProcessEnd,
        source: KernelSource,
        record_job: Job,
        replayer: Any,
        left: float,
    ) -> V.Verdict:
        """Replay the recorded plans (the recording process and all it started are gone) and give the verdict."""
        self.stream.machine = recording.machine
        if not self.recorded(recording, end):
            return self.verdict(end)
        try:
            replays = [self.replay_of(event, source) for event in recording.plans]
        except Tampered as exc:
            self.stream.tampered = str(exc)
            return self.verdict(end)
        self.stream.machine = None
        self.alternatives = method_alternatives([replay["plan"] for replay in replays if "plan" in replay])
        # the replay's data values: known to this process and the replay only, unless this is a debugging run
        data_seed = (
            debugging_data_seed(self.job.seed)
            if self.job.debugging
            else secret_data_seed(self.job.seed, max(self.selection, default=0) + 1)
        )
        self.judge.data_seed = data_seed
        # the replay compiles the kernels under names of its own: a crash's stack dump names the learner's file by them
        self.kernel_files = {f.compiled_name(i): f.label for i, f in enumerate(source.files)}
        recorded = recording.timing_plan  # None unless asked for (time_it)
        timing_plan = self.timing_plan_of(recorded, source) if self.time_it and recorded is not None else None
        if timing_plan is not None:
            self.timing_kernels = [op["kernel"] for op in timing_plan.get("ops", []) if op.get("op") == "launch"]
        key_plan = self.key_plan.ready() if self.key_plan is not None and timing_plan is not None else None
        replay_job = replace(
            record_job, role=REPLAY, data_seed=data_seed, kernel_source=source, replays=replays,
            timing_plan=timing_plan, key_plan=key_plan,
        )  # fmt: skip
        if key_plan is not None:
            mark("kept key plan sent")
        self.replayed = True
        mark("replay job ready")
        process = GradingProcess(replay_job, self.stream, max(left, 1.0), self.workdir, self._stop.is_set, replayer)
        try:
            for event in process.events():
                command = self.judge_event(event)
                if isinstance(event, Observed):
                    process.answer(command)
                    if command is None and timing_plan is not None:  # it prepares a timing not wanted: stop it
                        break
        except BaseException:  # Ctrl-C, or the grader's own error
            process.end()
            raise
        end = process.end()
        mark("replay process ended")
        return self.verdict(end)

    def recorded(self, recording: RecordStream, end: ProcessEnd) -> bool:
        """Whether the recording came back whole; otherwise its ending is carried over to the verdict."""
        self.stream.tampered = recording.tampered
        self.stream.grader_error = recording.grader_error
        self.stream.ending = recording.ending
        if recording.tampered or recording.grader_error or recording.ending is not None:
            return False
        if end.timed_out or not recording.complete or end.returncode != 0:
            done = len(recording.plans)
            self.stream.started = self.selection[done] if done < len(self.selection) else None
            self.stream.at_timing_size = done == len(self.selection) and self.time_it
            return False
        return True

    def timing_plan_of(self, recorded: TimingPlan, source: KernelSource) -> dict[str, Any] | None:
        """The plan at the timing size to replay; None, with the reason kept for the timing's verdict, when the
        learner's function raised there or its plan breaks a rule of the plans."""
        if recorded.stub or recorded.raised or not recorded.plans:
            where = f" ({recorded.raised_where[0]})" if recorded.raised_where else ""
            self.timing_problem = f"it raised {recorded.raised or 'no plan'}{where}"
            return None
        found = plan_problem(recorded.plans, source)
        if found is not None:
            self.timing_problem = f"its plan there breaks the rule {found['rule']}: {found['message']}"
            return None
        return recorded.plans[0]

    def replay_of(self, event: CasePlan, source: KernelSource) -> dict[str, Any]:
        """What the replay does with one recorded case: perform its plan, or report how recording it failed."""
        shown = {"printed": event.printed, "seconds": event.seconds}
        if event.stub or event.raised:
            failed = {"raised": event.raised, "raised_where": event.raised_where, "stub": event.stub}
            return {"observation": {**shown, **failed}}
        found = plan_problem(event.plans, source)
        if found is not None:
            return {"observation": {**shown, "plan_problem": found}}
        if not event.plans:
            raise Tampered(f"a plan event for case {event.index + 1} without its plans")
        largest = replayed_largest(event.largest, source) if event.largest else {}
        return {"plan": event.plans[0], **shown, **({"largest": largest} if largest else {})}

    def cancel(self) -> None:
        """Stop the grading process early (its verdict is no longer needed)."""
        self._stop.set()

    def stops_with(self, other: Stage) -> None:
        """Stop when `other` is cancelled, even before this stage starts (a further judging of its submission)."""
        self._stop = other._stop

    def judge_event(self, event: Event) -> str | None:
        """Judge one event as soon as it arrives; for `observed`, the answer: the timing request, or None."""
        if self.stopped_early:
            return None  # cases the grading process ran before it was stopped are not judged
        if isinstance(event, Machine) and self.progress:
            self.progress({"event": "machine", **asdict(event)})
        try:
            if isinstance(event, CaseObservation):
                result = self.judge.case_result(self.stream.cases[-1])
                mark(f"case {result.index} judged")
                self.results.append(result)
                self.launched[result.index] = {launch.kernel for launch in self.stream.cases[-1].launches}
                self.configs_run += [ran for ran in self.stream.cases[-1].configs if ran not in self.configs_run]
                if self.first_failure and not result.passed and not result.stub:
                    self.stopped_early = True
                    self._stop.set()
                if self.progress and not result.stub:
                    self.progress({"event": "case", **result.__dict__})
            elif isinstance(event, Observed):
                if not (self.time_it and self.all_passed()):
                    return None
                if self.before_timing is not None and not self.before_timing():
                    self.time_it = False  # failed elsewhere: not timed, and its verdict has no speed to give
                    return None
                if self.key_plan is not None:  # a key's plan still recording here uses the GPU: not while timing
                    self.key_plan.settle()
                return TIME_COMMAND
        except Tampered as exc:
            self.tampered = str(exc)
        except rulebook.RuleFailed as exc:
            self.rule_failed = str(exc)
            self.stopped_early = True
            self._stop.set()
        return None

    def all_passed(self) -> bool:
        return not self.tampered and len(self.results) == len(self.selection) and all(r.passed for r in self.results)

    def verdict(self, end: ProcessEnd) -> V.Verdict:
        machine = self.stream.machine
        v = V.Verdict(
            self.puzzle.number,
            V.FAILED,
            "",
            mode=machine.mode if machine else "",
            device=machine.name if machine else "",
            seed=self.job.seed,
            debugging=self.job.debugging,
            cases=self.results,
            file=self.file,
            seconds=end.seconds,
        )
        why = self.stream.tampered or self.tampered
        if why:
            v.status, v.summary = V.TAMPERED, TAMPERED_SUMMARY.format(why=why)
        elif self.rule_failed:
            v.status, v.summary = V.INTERNAL, RULE_FAILED_SUMMARY.format(error=self.rule_failed)
        elif self.stream.grader_error:
            grader_error_verdict(v, self.stream.grader_error, self.job.names)
        elif self.stream.ending is not None:
            ending_verdict(v, self.stream.ending)
        elif self.stopped_early:
            self.finished_verdict(v)
        elif (
            end.timed_out
            or not self.stream.complete
            or (end.returncode != 0 and self.stream.asked_time and not self.stream.timings)
        ):  # once every case is observed and no timing asked for, how the process ends says nothing
            unfinished_verdict(v, end, self.stream, self.timeout, self.file, {**self.job.names, **self.kernel_files})
        else:
            self.finished_verdict(v)
        if not v.passed:
            v.output = without_fault_dump(end.output or "")
            v.picture_data = self.judge.picture
            v.rule = v.rule or v.status
        return v

    def finished_verdict(self, v: V.Verdict) -> None:
        """Every selected case was observed: the case rules, then the kernels-off rule, then the speed bar."""
        stubs = [r for r in self.results if r.stub]
        step = self.puzzle.builds_on
        if self.job.earlier and step and any(f"Puzzle {step}: fill in" in r.problem for r in stubs):
            v.status = V.ERROR
            v.cases = []
            label = self.job.names.get(str(Path(self.job.earlier).resolve()), self.job.earlier)
            v.summary = earlier_stub_summary(self.puzzle.number, step, label, self.file)
            return
        if stubs:
            v.status, v.rule = V.ERROR, rulebook.outcome("stub")
            v.cases = []
            v.summary = (
                f"Your code is still the stub: fill in the FILL ME IN parts of {next(iter(self.job.names.values()))} "
                "(save the notebook if you grade it from a terminal), then check again."
            )
            return
        if not self.results:
            v.status = V.ERROR
            v.summary = "No case was selected, so nothing was graded: leave out the case filter."
            return
        failed = [r for r in self.results if not r.passed]
        if failed:
            first = failed[0]
            v.status = V.ERROR if any(r.raised for r in self.results) else V.FAILED
            v.rule = first.rule or (rulebook.outcome("raised") if first.raised else "")
            v.summary = (
                f"{len(failed)} of {V.plural(len(self.results), 'case')} failed; start with case {first.index + 1} "
                f"({first.description}): {first.problem}"
            )
            if self.stopped_early:
                stopped = f"grading stopped at the first failing case, case {first.index + 1}"
                v.summary = f"{stopped} ({first.description}): {first.problem}"
            cause_over_cases(failed, self.puzzle.number, self.file, self.job.seed, self.judge.device == "cpu")
            if not self.stopped_early:  # which parameter splits failing from passing cases needs them all
                params = [self.judge.cases[r.index].given() for r in self.results]
                v.details += failure_pattern(params, [r.passed for r in self.results], first.cause)
            if self.job.earlier and self.puzzle.builds_on:
                label = self.job.names.get(str(Path(self.job.earlier).resolve()), self.job.earlier)
                v.details += earlier_step_advice(
                    self.puzzle.builds_on, first.index, self.launched.get(first.index, set()),
                    (Path(self.job.file), Path(self.job.earlier)), label, self.job.seed,
                )  # fmt: skip
            if first.rule in rulebook.names(draws_map=True) and self.judge.device == "cpu":
                v.map_case = first.index
                v.details.append(map_advice(self.puzzle.number, first.index, self.file, seed=self.job.seed))
            return
        v.status = V.PASSED
        v.summary = V.all_match(len(self.results))
        if self.judge.first_access is not None and not self.traffic_later:
            v.details += traffic_details(self.puzzle, self.judge.first_access)
        if self.time_it:
            self.apply_timings(v)

    def apply_timings(self, v: V.Verdict) -> None:
        timings = self.stream.timings or Timings()
        if self.timing_problem and self.stream.timings is None:  # nothing to time: the recording said why
            case = self.puzzle.timing_case.given() if self.puzzle.timing_case else {}
            timings = Timings(case=case, problem=self.timing_problem)
        try:  # both outputs at the timing size, read once, compared here and then dropped
            v.timings = from_measurement(
                self.puzzle, timings, load_timing_outputs(self.workdir, timings), device=v.device
            )
            if v.timings.get("summary") and timings.graphs:
                v.timings["summary"] += f" Timed as CUDA graph replays: {', '.join(timings.graphs)}."
            v.details += unjudged_at_the_timing_size(self.timing_kernels, self.launched)
        except Tampered as exc:
            v.status, v.summary = V.TAMPERED, TAMPERED_SUMMARY.format(why=str(exc))
            return
        except (ValueError, TypeError, KeyError) as exc:
            v.status, v.summary = V.TAMPERED, TAMPERED_SUMMARY.format(why=f"unreadable timings: {exc}")
            return
        if v.timings.get("bar_failed"):
            v.status, v.summary, v.rule = V.FAILED, v.timings["bar_failed"], rulebook.outcome("speed_bar")
        elif v.timings.get("noisy") and self.puzzle.speed_bar:  # fair timing: no speed verdict on a busy GPU
            v.status, v.summary = (
                V.ENVIRONMENT,
                f"All {len(self.results)} cases match the reference. " + str(v.timings["noisy"]),
            )
        elif v.timings.get("summary"):
            v.summary += " " + v.timings["summary"]
            if v.timings.get("noisy"):
                v.summary += " " + str(v.timings["noisy"])


def traffic_details(puzzle: Puzzle, access: dict[str, Any], case: str = "case 1") -> list[str]:
    """The lines of a passing verdict on the memory traffic of `case` (its access log), beside the answer key's."""
    key = answer_key_log(puzzle)
    heading = (
        f"Memory traffic of {case}: bytes read and written per tensor, as multiples of its size (1.0x: as many bytes "
        "as the tensor has; the minimum is an input read once and an output written once):"
    )
    return [heading] + ["  " + line for line in traffic_lines(access, key)]


def unjudged_at_the_timing_size(timing_kernels: list[str], launched: dict[int, set[str]]) -> list[str]:
    """A line naming the kernels the timing ran that no graded case ran (host code that chooses its kernels by the
    sizes of the inputs): they were timed, and their values compared at the timing size, but no rule judged their
    method (docs/grading.md). None when every kernel timed was graded."""
    graded = set().union(*launched.values()) if launched else set()
    unjudged = sorted(set(timing_kernels) - graded)
    if not unjudged:
        return []
    names = ", ".join(f"`{name}`" for name in unjudged)
    return [
        f"At the timing size your code launched {names}, which no graded case ran: their values were compared there, "
        "but no rule judged their method. Launch the same kernels at every size to have your method judged."
    ]


def kernel_source(job: Job) -> KernelSource:
    """The submission's kernels from its source text (the step it builds on first), read now, before its code runs."""
    files = [job.earlier, job.file] if job.earlier else [job.file]
    sources = []
    for file in files:
        path = Path(file)
        label = job.names.get(str(path.resolve()), job.names.get(str(path), path.name))
        try:
            sources.append((str(path.resolve()), label, path.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError):
            continue  # the recording process reports a file it cannot load
    return extract(sources)
