"""What the grader tells a grading process (a `Job`) and what it accepts back (a checked event stream).

A check runs two grading processes, one after the other. The recording process (role RECORD) runs the
learner's code, so anything it writes may be forged: it reports plans (`RecordStream`), which are only claims.
The replay process (role REPLAY) starts once the recording process and everything it started are gone; it
runs none of the learner's host code and reports observations of the replayed plans (`Stream`), in one order:

    machine, then either environment | load_error | missing,
    or for each selected case: case_start, case (an observation), then observed,
    and, only when the grader asks for it on the process's standard input, timings (with the name of the file of
    both outputs at the timing size, which the grader compares itself).
    At any point after machine: refused (the audit hook of `checks.engine.grading_process.hardening` refused a
    request of the learner's code), which ends the report as tampered with. At any point: grader_error (the grading
    process's own code raised: a traceback), which ends it as the grader's internal error.

Every event carries a token the grader sends on the process's standard input before the learner's
code is loaded, so a line appended to the events file by other means is refused. `Stream` enforces
the order. Any other event, a repeated or out-of-order one, a line that is not
JSON, or a field of the wrong type marks the stream as tampered with: the verdict is never a pass.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from checks.engine.observations import CaseObservation

EVENTS = (
    "machine", "environment", "load_error", "missing", "case_start", "case", "observed", "timings", "refused",
    "grader_error",
)  # fmt: skip
TIME_COMMAND = "time"
RECORD, REPLAY = "record", "replay"
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
    cases: list[int] | None = None  # indices of the cases to run (None: all)
    solution_file: str = ""
    earlier: str = ""  # the code of the step this one builds on, loaded first (checks.engine.submission.earlier_step)
    role: str = RECORD  # RECORD: run the learner's function, write down its plans; REPLAY: perform them
    global_names: list[str] = field(default_factory=list)  # module-level names the kernels read (recorded)
    time_plan: bool = False  # record a plan at the timing size too (a GPU check that will be timed)
    # the replay's job, written only after the recording process is gone:
    data_seed: int = 0  # the secret the data values of the replayed inputs are drawn with
    kernel_source: dict[str, Any] | None = None  # checks.engine.kernel_source.KernelSource, read before any code ran
    replays: list[dict[str, Any]] = field(default_factory=list)  # per selected case: {"plan": ...} or {"observation"}
    timing_plan: dict[str, Any] | None = None

    def to_json(self) -> str:
        return json.dumps(asdict(self), allow_nan=True)

    @classmethod
    def from_json(cls, text: str) -> Job:
        return cls(**json.loads(text))


def outputs_path(workdir: Path, index: int) -> Path:
    """Where the replay saves the tensors one replayed case returned; the grader decides, not the grading process."""
    return workdir / f"case_{index}.pt"


def timing_outputs_path(workdir: Path) -> Path:
    """Where the grading process saves the submission's and the answer key's outputs at the timing size."""
    return workdir / "timing_outputs.pt"


def access_path(workdir: Path, index: int) -> Path:
    """Where the grading process saves the interpreter's access log of one case."""
    return workdir / f"access_{index}.pt"


RECORD_EVENTS = ("machine", "environment", "load_error", "missing", "plan", "timing_plan", "observed", "refused",
                 "grader_error")  # fmt: skip


class CheckedLines:
    """Reads a grading process's events one line at a time: `feed_line` of `Stream` and `RecordStream`."""

    accepted: tuple[str, ...] = ()  # the events this kind of stream may carry
    tampered: str
    token: str

    def feed_line(self, line: str) -> dict[str, Any] | None:
        """Check one line; return the event, or None (and set `tampered`) when it breaks the protocol."""
        if self.tampered:
            return None
        try:
            event = json.loads(line)
            if not isinstance(event, dict) or event.get("event") not in self.accepted:
                raise Tampered(f"an event the grader does not accept ({str(event)[:80]})")
            if event.pop("token", None) != self.token:
                raise Tampered(f"a {event['event']} event the grading process did not write")
            self._accept(event)
        except (Tampered, ValueError, TypeError, KeyError) as exc:
            self.tampered = str(exc) if isinstance(exc, Tampered) else f"a malformed event ({exc})"
            return None
        return event

    def _accept(self, event: dict[str, Any]) -> None:
        raise NotImplementedError


@dataclass
class RecordStream(CheckedLines):
    """The events of a recording process (the learner's code runs there): machine, then load_error | missing |
    environment, or a plan event for each selected case in order, then (when asked) timing_plan, then observed.
    Its plans are only claims: the replay makes them true or not, so a forged plan can only fail."""

    accepted = RECORD_EVENTS

    selection: list[int]
    machine: dict[str, Any] | None = None
    ending: dict[str, Any] | None = None
    plans: list[dict[str, Any]] = field(default_factory=list)
    timing_plan: dict[str, Any] | None = None
    observed: bool = False
    asked_time: bool = False
    tampered: str = ""
    grader_error: str = ""
    token: str = ""

    def _accept(self, event: dict[str, Any]) -> None:
        kind = event["event"]
        if kind == "refused":
            raise Tampered(f"your code tried {str(event.get('reason', ''))[:200]}, which the grading process refuses")
        if kind == "grader_error":
            self.grader_error = str(event.get("text", ""))[-4000:] or "no traceback"
            return
        if kind == "machine":
            if self.machine is not None:
                raise Tampered("a second machine event")
            self.machine = {k: str(v) for k, v in event.items() if k != "event"}
            return
        if self.machine is None or self.ending is not None or self.observed:
            raise Tampered(f"{kind} out of order")
        if kind in ("environment", "load_error", "missing"):
            if self.plans:
                raise Tampered(f"{kind} after cases had run")
            self.ending = event
        elif kind == "plan":
            done = len(self.plans)
            if done >= len(self.selection) or event.get("index") != self.selection[done]:
                raise Tampered(f"a plan for case {event.get('index')} out of order")
            if not isinstance(event.get("plans"), list) or not isinstance(event.get("raised", ""), str):
                raise Tampered("a plan event without its plans")
            self.plans.append(event)
        elif kind == "timing_plan":
            if self.timing_plan is not None or len(self.plans) != len(self.selection):
                raise Tampered("a timing plan out of order")
            self.timing_plan = event
        elif kind == "observed":
            stopped = bool(self.plans) and (self.plans[-1].get("stub") or self.plans[-1].get("raised"))
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
    machine: dict[str, Any] | None = None
    ending: dict[str, Any] | None = None  # environment, load_error or missing
    cases: list[CaseObservation] = field(default_factory=list)
    started: int | None = None  # index of the case in progress
    observed: bool = False
    timings: dict[str, Any] | None = None
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
        return last.stub or (last.raised != "" and (self.machine or {}).get("mode") == "gpu")

    def _accept(self, event: dict[str, Any]) -> None:
        kind = event["event"]
        if kind == "machine":
            if self.machine is not None:
                raise Tampered("a second machine event")
            self.machine = {k: str(v) for k, v in event.items() if k != "event"}
            return
        if (
            kind == "refused"
        ):  # hardening (checks.engine.grading_process.hardening): the learner's code asked for what is refused
            raise Tampered(f"your code tried {str(event.get('reason', ''))[:200]}, which the grading process refuses")
        if kind == "grader_error":  # at any point: the grading process's own code raised
            if self.grader_error:
                raise Tampered("a second grader_error event")
            self.grader_error = str(event.get("text", ""))[-4000:] or "no traceback"
            return
        if self.machine is None:
            raise Tampered(f"{kind} before the machine event")
        if self.ending is not None or (self.observed and kind != "timings"):
            raise Tampered(f"{kind} after the end of the report")
        getattr(self, f"_on_{kind}")(event)

    def _on_environment(self, event: dict[str, Any]) -> None:
        if self.cases or self.started is not None:
            raise Tampered(f"{event['event']} after cases had run")
        self.ending = event

    _on_load_error = _on_missing = _on_environment

    def _on_case_start(self, event: dict[str, Any]) -> None:
        expected = self._next_index()
        if self.started is not None or expected is None or event["index"] != expected:
            raise Tampered(f"case_start for case {event.get('index')} out of order")
        self.started = expected

    def _on_case(self, event: dict[str, Any]) -> None:
        obs = CaseObservation.from_dict({k: v for k, v in event.items() if k != "event"})
        if self.started is None or obs.index != self.started or self.stopped_early_by_rule():
            raise Tampered(f"an observation of case {obs.index} out of order")
        self.cases.append(obs)
        self.started = None

    def _on_observed(self, event: dict[str, Any]) -> None:
        if self._next_index() is not None and not self.stopped_early_by_rule():
            raise Tampered("the end of the report before every case was observed")
        self.observed = True

    def _on_timings(self, event: dict[str, Any]) -> None:
        if not self.asked_time or self.timings is not None:
            raise Tampered("timings the grader did not ask for")
        timings = {k: v for k, v in event.items() if k != "event"}
        saved = "outputs_file" in timings
        if saved and timings.get("outputs_file") != timing_outputs_path(Path()).name:
            raise Tampered("timings that name their outputs at the timing size wrongly")
        if "answer key" in (timings.get("times") or {}) and not saved:  # the key ran: its outputs were saved
            raise Tampered("timings without the outputs at the timing size")
        self.timings = timings

    @property
    def complete(self) -> bool:
        return self.ending is not None or self.observed
