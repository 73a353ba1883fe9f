"""What the grader tells a grading process (a `Job`) and what it accepts back (a checked event stream).

A check runs two grading processes, one after the other. The recording process (role RECORD) runs the
learner's code, so anything it writes may be forged: it reports plans (`RecordStream`), which are only claims.
The replay process (role REPLAY) starts once the recording process and everything it started are gone; it
runs none of the learner's host code and reports observations of the replayed plans (`Stream`), in one order:

    machine, then either environment | load_error | missing,
    or for each selected case: case_start, case (an observation), then observed,
    and, only when the grader asks for it on the process's standard input, timings (with the name of the file of
    both outputs at the timing size, which the grader compares itself).
    At any point after machine: refused (the audit hook of `checks.engine.processes.hardening` refused a
    request of the learner's code), which ends the report as tampered with. At any point: grader_error (the grading
    process's own code raised: a traceback), which ends it as the grader's internal error.

Every event carries a token the grader sends on the process's standard input before the learner's
code is loaded, so a line appended to the events file by other means is refused. `Stream` enforces
the order. Any other event, a repeated or out-of-order one, a line that is not
JSON, or a field of the wrong type marks the stream as tampered with: the verdict is never a pass.

The wire is typed: each kind of event is a dataclass here (the case event is `CaseObservation`), and `feed_line`
builds it from its line with `checks.typed_reader.build`, which checks every field against its annotation and refuses an
unknown or a missing one, naming it; the `Job` is read the same way. The plans a plan event carries stay JSON
(`dict[str, Any]`): a plan is data, performed op by op by the replay and compared as it came between the case's two
draws (`checks.engine.contract.plan.first_difference`); its form is checked op by op by
`checks.engine.contract.plan.check` (through
`checks.engine.judging.plans.plan_problem`), which knows every op a recorder writes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import IO, Any, ClassVar, Literal

from checks.engine.contract.kernel_source import KernelSource
from checks.engine.contract.observations import CaseObservation
from checks.typed_reader import build

TIME_COMMAND = "time"
Role = Literal["record", "replay"]  # the two grading processes of a stage
RECORD: Role = "record"
REPLAY: Role = "replay"
EXIT_COMMAND = "exit"
PRELOAD_FLAG = "--preload"  # on the command line of a process started ahead of its check


@dataclass
class Job:
    """One run of the grading process: which code, which puzzle, which cases, which device."""

    puzzle: int | str  # the puzzle as the registry knows it
    file: str  # the module to load
    names: dict[str, str]  # resolved path -> how to name it in messages
    seed: int
    interpret: bool = False
    debugging: bool = False  # a debugging run (--seed): the replay's data values come from the seed, not a secret
    cases: list[int] | None = None  # indices of the cases to run (None: all)
    earlier: str = ""  # the code of the step this one builds on, loaded first (checks.engine.submission.earlier_step)
    role: Role = RECORD  # RECORD: run the learner's function, write down its plans; REPLAY: perform them
    global_names: list[str] = field(default_factory=list)  # module-level names the kernels read (recorded)
    time_plan: bool = False  # record a plan at the timing size too (a GPU check that will be timed)
    workdir: str = ""  # the check's folder (events, outputs), on the pipe rather than the command line
    scratch: str = ""  # the recording process's own folder, the one place it may write
    # the interpreter stage beside a GPU stage: record on the GPU, as the GPU stage does, and replay in the interpreter
    record_on_gpu: bool = False
    # which config of an autotuned launch the interpreter replays (checks.engine.replay.perform.Tuning): the
    # `alternative`-th of its distinct configs, or, for a kernel named in `chosen`, the config the GPU stage ran
    alternative: int = 0
    chosen: dict[str, dict[str, Any]] = field(default_factory=dict)
    # cases after the puzzle's own interpreter cases, sized from the tiles judged (checks.registry.with_method_cases)
    method_cases: list[dict[str, Any]] = field(default_factory=list)
    # the replay's job, written only after the recording process is gone:
    data_seed: int = 0  # the secret the data values of the replayed inputs are drawn with
    kernel_source: KernelSource | None = None  # the submission's kernels, read before any code ran
    replays: list[dict[str, Any]] = field(default_factory=list)  # per selected case: {"plan": ...} or {"observation"}
    timing_plan: dict[str, Any] | None = None
    # the answer key's plan at the timing size and its kernels' source, as the grader's own process recorded and keeps
    # them (checks.engine.answer_key.kept_plan); None: the replay records the key's plan itself
    key_plan: dict[str, Any] | None = None
    # the digest of the grader's files taken before the recording ran (checks.engine.processes.sealing.grader_digest):
    # the replay performs nothing if its own differs
    grader_digest: str = ""

    def to_json(self) -> str:
        return json.dumps(asdict(self), allow_nan=True)

    @classmethod
    def from_json(cls, text: str) -> Job:
        """The job the grader wrote; RecordError (a TypeError naming the field) for a field unknown, missing or of
        the wrong type."""
        return build(cls, json.loads(text), "job")


def outputs_path(workdir: Path, index: int) -> Path:
    """Where the replay saves the tensors one replayed case returned; the grader decides, not the grading process."""
    return workdir / f"case_{index}.pt"


def reversed_outputs_path(workdir: Path, index: int) -> Path:
    """Where the replay saves what case `index` returns when run again with the programs of every launch last to first
    (only for a call in which an atomic ordered a load of what another program of the launch stored)."""
    return workdir / f"case_{index}_reversed.pt"


def interleaved_outputs_path(workdir: Path, index: int) -> Path:
    """Where the replay saves what case `index` returns when run again with the programs of every launch interleaved
    at their atomics (`checks.engine.access.interleaving`; for the same calls as `reversed_outputs_path`)."""
    return workdir / f"case_{index}_interleaved.pt"


def fresh_outputs_path(workdir: Path, index: int) -> Path:
    """Where the replay saves what case `index` returns when run again from the state its kept tensors were made in
    (only for a call that found them changed by the calls before it)."""
    return workdir / f"case_{index}_fresh.pt"


def timing_outputs_path(workdir: Path) -> Path:
    """Where the grading process saves the submission's and the answer key's outputs at the timing size."""
    return workdir / "timing_outputs.pt"


def access_path(workdir: Path, index: int) -> Path:
    """Where the grading process saves the interpreter's access log of one case."""
    return workdir / f"access_{index}.pt"


@dataclass
class Machine:
    """machine: what a process grades on (`checks.engine.machine.detect` finds it), the one record of it: the grading
    process works with it and sends it as its machine event (`asdict`), which the grader reads back as it is."""

    mode: Literal["gpu", "interpreter"]
    device: str  # where tensors go, as torch names it: "cuda" or "cpu"
    name: str  # what to print: the GPU's name or "CPU (Triton interpreter)"
    torch_version: str
    triton_version: str  # "missing" where Triton is not installed
    numpy_version: str
    problem: str | None = None  # why this machine cannot grade (the environment event says it too), or None


@dataclass
class Environment:
    """environment: the machine cannot grade (the report ends here)."""

    problem: str


@dataclass
class LoadError:
    """load_error: the submission (or the earlier step it builds on, `step`) does not load (the report ends here)."""

    text: str
    where: list[str]  # the learner's own lines the exception passed
    step: str | None = None


@dataclass
class Missing:
    """missing: the submission does not define these names (the report ends here)."""

    names: list[str]


@dataclass
class RecordedCall:
    """What the learner's function asked of the GPU on one call, recorded (the fields of a plan event)."""

    plans: list[dict[str, Any]]  # checks.engine.contract.plan: checked by checks.engine.contract.plan.check, not here
    raised: str
    raised_where: list[str]
    stub: bool
    printed: str
    seconds: float


@dataclass
class CasePlan(RecordedCall):
    """plan: what the learner's function asked of the GPU on the two draws of one case, or how the call failed."""

    index: int
    # the first case of the interpreter stage: the plan at the puzzle's largest sizes ({"plan": ...}), or how the call
    # raised there ({"raised", "where"}) (checks.engine.record.largest); {} for every other case
    largest: dict[str, Any] = field(default_factory=dict)


@dataclass
class TimingPlan(RecordedCall):
    """timing_plan: the plan at the timing size (one draw)."""


@dataclass
class CaseStart:
    """case_start: the replay starts this case."""

    index: int


@dataclass
class Observed:
    """observed: every selected case was reported (or the report stopped early by rule)."""


@dataclass
class Timings:
    """timings: `checks.engine.replay.measure.TimingRun.rounds`'s raw measurements at the timing size (all
    of them absent for a puzzle without a timing case); `checks.engine.judging.timing.from_measurement` judges them."""

    case: dict[str, Any] = field(default_factory=dict)  # the timing size
    times: dict[str, float] = field(default_factory=dict)  # contender -> median milliseconds
    baseline: str = "torch"
    problem: str | None = None  # the submission could not run at the timing size
    outputs_file: str | None = None  # both outputs at the timing size (timing_outputs_path), when the key ran
    outputs_compared: str | None = None  # which elements of a large output were saved
    graphs: list[str] = field(default_factory=list)  # the contenders timed as CUDA graph replays
    rounds: dict[str, list[float]] | None = None  # contender -> milliseconds per interleaved round
    nbytes: float = 0.0
    flops: float = 0.0
    peaks: dict[str, float] | None = None  # the GPU's measured roofline (checks.engine.judging.timing.Peaks)


@dataclass
class Refused:
    """refused: the audit hook refused a request of the learner's code (`Events.refusals` writes it)."""

    reason: str


@dataclass
class GraderError:
    """grader_error: the grading process's own code raised."""

    text: str  # the traceback


Ending = Environment | LoadError | Missing  # an event that ends the report before any case
Event = (
    Machine | Ending | CasePlan | TimingPlan | CaseStart | CaseObservation | Observed | Timings | Refused | GraderError
)
ENDINGS = ("environment", "load_error", "missing")
# the events of each kind of report, by the name each line carries in its "event" field
RECORD_EVENTS: dict[str, type] = {
    "machine": Machine, "environment": Environment, "load_error": LoadError, "missing": Missing, "plan": CasePlan,
    "timing_plan": TimingPlan, "observed": Observed, "refused": Refused, "grader_error": GraderError,
}  # fmt: skip
EVENTS: dict[str, type] = {
    "machine": Machine, "environment": Environment, "load_error": LoadError, "missing": Missing,
    "case_start": CaseStart, "case": CaseObservation, "observed": Observed, "timings": Timings, "refused": Refused,
    "grader_error": GraderError,
}  # fmt: skip


KIND: dict[type, str] = {cls: kind for kinds in (RECORD_EVENTS, EVENTS) for kind, cls in kinds.items()}


def _fields(record: Any) -> dict[str, Any]:
    """A dataclass's fields by name, as JSON writes them (a nested dataclass through this again): unlike `asdict`, the
    values are not copied, so a list of the recorder's own kind (a plan's operations) goes out as the list it is."""
    if not is_dataclass(record) or isinstance(record, type):
        raise TypeError(f"Object of type {type(record).__name__} is not JSON serializable")  # as json.dumps says
    return {f.name: getattr(record, f.name) for f in fields(record)}


class Events:
    """The one writer of a grading process's events: `send` writes an event of this protocol (its dataclass) as one
    JSON line, its kind in "event" and the grader's token beside its fields, to the events file `stream`."""

    def __init__(self, stream: IO[str], token: str) -> None:
        self._f = stream
        self._token = token

    @classmethod
    def open(cls, path: str | Path, token: str) -> Events:
        """A writer that appends to the events file at `path`."""
        return cls(open(path, "a", encoding="utf-8"), token)

    def send(self, event: Event) -> None:
        line = json.dumps({"event": KIND[type(event)], **_fields(event), "token": self._token}, default=_fields)
        self._f.write(line + "\n")
        self._f.flush()

    def refusals(self) -> Callable[[str], None]:
        """A writer of the `Refused` event for the audit hook (`checks.engine.processes.hardening`), bound now,
        json.dumps included: whatever the learner's code later changes in this module or in json, a refusal is
        written."""
        dumps, write, flush, kind, token = json.dumps, self._f.write, self._f.flush, KIND[Refused], self._token

        def refuse(reason: str) -> None:
            write(dumps({"event": kind, "reason": reason, "token": token}) + "\n")  # the fields of `Refused`
            flush()

        return refuse


class CheckedLines:
    """Reads a grading process's events one line at a time: `feed_line` of `Stream` and `RecordStream`."""

    accepted: ClassVar[dict[str, type]] = {}  # the events this kind of stream may carry
    tampered: str
    token: str

    def feed_line(self, line: str) -> Event | None:
        """Check one line; return its event (the dataclass of its kind), or None (and set `tampered`) when it breaks
        the protocol: a line that is not an accepted event, lacks the token, has a field unknown, missing or of the
        wrong type (`checks.typed_reader.build` names it), or comes out of order."""
        if self.tampered:
            return None
        try:
            data = json.loads(line)
            kind = data.get("event") if isinstance(data, dict) else None
            if not isinstance(kind, str) or kind not in self.accepted:
                raise Tampered(f"an event the grader does not accept ({str(data)[:80]})")
            if data.pop("token", None) != self.token:
                raise Tampered(f"a {kind} event the grading process did not write")
            del data["event"]
            cls = self.accepted[kind]
            event = CaseObservation.from_dict(data, kind) if cls is CaseObservation else build(cls, data, kind)
            self._accept(kind, event)
        except (Tampered, ValueError, TypeError, KeyError) as exc:
            self.tampered = str(exc) if isinstance(exc, Tampered) else f"a malformed event ({exc})"
            return None
        return event

    def _accept(self, kind: str, event: Event) -> None:
        raise NotImplementedError


@dataclass
class RecordStream(CheckedLines):
    """The events of a recording process (the learner's code runs there): machine, then load_error | missing |
    environment, or a plan event for each selected case in order, then (when asked) timing_plan, then observed.
    Its plans are only claims: the replay makes them true or not, so a forged plan can only fail."""

    accepted = RECORD_EVENTS

    selection: list[int]
    machine: Machine | None = None
    ending: Ending | None = None
    plans: list[CasePlan] = field(default_factory=list)
    timing_plan: TimingPlan | None = None
    observed: bool = False
    asked_time: bool = False
    tampered: str = ""
    grader_error: str = ""
    token: str = ""

    def _accept(self, kind: str, event: Event) -> None:
        if isinstance(event, Refused):
            raise Tampered(f"your code tried {event.reason[:200]}, which the grading process refuses")
        if isinstance(event, GraderError):
            self.grader_error = event.text[-4000:] or "no traceback"
            return
        if isinstance(event, Machine):
            if self.machine is not None:
                raise Tampered("a second machine event")
            self.machine = event
            return
        if self.machine is None or self.ending is not None or self.observed:
            raise Tampered(f"{kind} out of order")
        if isinstance(event, Environment | LoadError | Missing):
            if self.plans:
                raise Tampered(f"{kind} after cases had run")
            self.ending = event
        elif isinstance(event, CasePlan):
            done = len(self.plans)
            if done >= len(self.selection) or event.index != self.selection[done]:
                raise Tampered(f"a plan for case {event.index} out of order")
            self.plans.append(event)
        elif isinstance(event, TimingPlan):
            if self.timing_plan is not None or len(self.plans) != len(self.selection):
                raise Tampered("a timing plan out of order")
            self.timing_plan = event
        elif isinstance(event, Observed):
            stopped = bool(self.plans) and (self.plans[-1].stub or self.plans[-1].raised)
            if len(self.plans) != len(self.selection) and not stopped:
                raise Tampered("the end of the report before every case was recorded")
            self.observed = True

    @property
    def complete(self) -> bool:
        return self.ending is not None or self.observed


class Tampered(Exception):
    """The grading process's report does not follow the protocol."""


@dataclass
class Stream(CheckedLines):
    """The events of one grading process, checked one at a time as they arrive."""

    accepted = EVENTS

    selection: list[int]  # the case indices the grader asked for, in order
    machine: Machine | None = None
    ending: Ending | None = None  # environment, load_error or missing
    cases: list[CaseObservation] = field(default_factory=list)
    started: int | None = None  # index of the case in progress
    at_timing_size: bool = False  # the recording had every case and was at the timing size when it stopped
    observed: bool = False
    timings: Timings | None = None
    asked_time: bool = False
    tampered: str = ""
    grader_error: str = ""  # the traceback of an exception in the grading process's own code
    token: str = ""  # sent to the grading process before it loads the learner's code; every event carries it

    def _next_index(self) -> int | None:
        done = len(self.cases)
        return self.selection[done] if done < len(self.selection) else None

    def stopped_early_by_rule(self) -> bool:
        """Whether the last case ended the run legitimately: the stub, or an error on a GPU."""
        if not self.cases:
            return False
        last = self.cases[-1]
        return last.stub or (last.raised != "" and self.machine is not None and self.machine.mode == "gpu")

    def _accept(self, kind: str, event: Event) -> None:
        if isinstance(event, Machine):
            if self.machine is not None:
                raise Tampered("a second machine event")
            self.machine = event
            return
        if isinstance(event, Refused):
            # hardening (checks.engine.processes.hardening): the learner's code asked for what is refused
            raise Tampered(f"your code tried {event.reason[:200]}, which the grading process refuses")
        if isinstance(event, GraderError):  # at any point: the grading process's own code raised
            if self.grader_error:
                raise Tampered("a second grader_error event")
            self.grader_error = event.text[-4000:] or "no traceback"
            return
        if self.machine is None:
            raise Tampered(f"{kind} before the machine event")
        if self.ending is not None or (self.observed and kind != "timings"):
            raise Tampered(f"{kind} after the end of the report")
        if kind in ENDINGS:
            if self.cases or self.started is not None:
                raise Tampered(f"{kind} after cases had run")
            self.ending = event
            return
        getattr(self, f"_on_{kind}")(event)

    def _on_case_start(self, event: CaseStart) -> None:
        expected = self._next_index()
        if self.started is not None or expected is None or event.index != expected:
            raise Tampered(f"case_start for case {event.index} out of order")
        self.started = expected

    def _on_case(self, obs: CaseObservation) -> None:
        if self.started is None or obs.index != self.started or self.stopped_early_by_rule():
            raise Tampered(f"an observation of case {obs.index} out of order")
        self.cases.append(obs)
        self.started = None

    def _on_observed(self, event: Observed) -> None:
        if self._next_index() is not None and not self.stopped_early_by_rule():
            raise Tampered("the end of the report before every case was observed")
        self.observed = True

    def _on_timings(self, timings: Timings) -> None:
        if not self.asked_time or self.timings is not None:
            raise Tampered("timings the grader did not ask for")
        saved = timings.outputs_file is not None
        if saved and timings.outputs_file != timing_outputs_path(Path()).name:
            raise Tampered("timings that name their outputs at the timing size wrongly")
        if "answer key" in timings.times and not saved:  # the key ran: its outputs were saved
            raise Tampered("timings without the outputs at the timing size")
        self.timings = timings

    @property
    def complete(self) -> bool:
        return self.ending is not None or self.observed
