"""The grader's answer, as data (for --json, progress and class reports) and as text."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

# status values
PASSED = "passed"
FAILED = "failed"  # ran, and a case was wrong
ERROR = "error"  # the submission raised, or could not be loaded
TIMEOUT = "timeout"
CRASHED = "crashed"  # the grading process died (segfault, CUDA fault, killed for memory)
ENVIRONMENT = "environment"  # the machine cannot grade (the numpy pitfall, no triton, ...)
NOT_READY = "not-ready"  # the puzzle is listed but not written yet
NEEDS_HOPPER = "needs-hopper"  # a Hopper step (Gluon) checked where there is no Hopper GPU: not graded here
INTERNAL = "internal"  # the grader itself broke: never the learner's fault
TAMPERED = "tampered"  # the grading process's report was incomplete or forged

# what a check interrupted by Ctrl-C (or Kernel > Interrupt) says, wherever it was running
STOPPED = "Stopped: no verdict was given or recorded."


@dataclass
class CaseResult:
    index: int
    description: str
    passed: bool
    seconds: float = 0.0
    problem: str = ""  # one line: what is wrong
    raised: bool = False  # the learner's code raised an exception
    stub: bool = False  # ... and it was the stub's NotImplementedError
    rule: str = ""  # the rule the case broke (checks/engine/judging/rules/rulebook.py), when one did
    cause: bool = False  # its details name a cause, beside which no case parameter is said to separate the failures
    diagnosed: bool = False  # its problem says why the values are wrong (the merge of the splits, an overflow...)
    printed: str = ""  # what the learner's code printed (and the warnings it raised) during this case
    details: list[str] = field(default_factory=list)
    fits: dict[str, str] = field(default_factory=dict)  # mistake -> its sentence: those that give these values
    degenerate: bool = False  # too small a case to tell mistakes apart: it never decides a cause alone
    stated: str = ""  # the mistake details[0] names for this case, kept only when it fits every failing case


@dataclass
class Verdict:
    puzzle: int | str
    status: str
    summary: str  # one sentence: what happened and what to do next
    mode: str = ""  # "gpu" or "interpreter"
    device: str = ""  # what the grading machine is, as printed (`Machine.name`): a GPU's name, or the CPU's
    seed: int | None = None
    debugging: bool = False  # a debugging run (--seed): data values from the seed, the same each time; not a grade
    cases: list[CaseResult] = field(default_factory=list)
    details: list[str] = field(default_factory=list)
    timings: dict[str, Any] = field(default_factory=dict)
    output: str = ""  # the tail of what the submission printed, when it failed
    picture_data: str = ""  # a .pt file with the failing case's error map, when there is one
    seconds: float = 0.0
    # what rejected it: a rule of checks/engine/judging/rules/rulebook.py, "raised", "speed_bar", or the status
    rule: str = ""
    map_case: int | None = None  # the CPU case whose access map shows why a rule on memory accesses failed
    file: str = ""  # the file graded, as commands name it (FILE=...); "" for the puzzle's notebook
    earlier: str = ""  # the earlier step's code given with --earlier, as commands name it; "" when none was
    # one sentence when the kernel did not seal the process that ran the learner's code (no Landlock); "" when it did
    unsealed: str = ""
    only_case: int | None = None  # the one case graded (--case K, numbered from 1); None when every case was

    @property
    def passed(self) -> bool:
        return self.status == PASSED

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Verdict:
        cases = [CaseResult(**c) for c in data.pop("cases", [])]
        return cls(cases=cases, **data)


def plural(count: int, noun: str) -> str:
    """A count with its noun: '1 element', '3 elements'."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def agree(count: int, one: str, many: str) -> str:
    """The verb (or word) that agrees with a count: agree(1, 'is', 'are') is 'is'."""
    return one if count == 1 else many


def all_match(count: int) -> str:
    """A passing verdict's summary: every case graded matches the reference."""
    return "the one case graded matches the reference." if count == 1 else f"all {count} cases match the reference."


def make_command(target: str, puzzle: int | str, file: str = "", args: str = "", earlier: str = "") -> str:
    """A make command that repeats the learner's own inputs: PUZZLE, FILE and the --earlier file, then `args`:
    `make check PUZZLE=9 FILE=p9.py ARGS='--earlier p9a.py --seed 7'`."""
    words = [f"make {target} PUZZLE={puzzle}"]
    if file:
        words.append(f"FILE={shlex.quote(file)}")
    given = " ".join(part for part in (f"--earlier {shlex.quote(earlier)}" if earlier else "", args) if part)
    if given:
        words.append(f'ARGS="{given}"' if "'" in given else f"ARGS='{given}'")
    return " ".join(words)


_COMMAND = re.compile(  # what `make_command` writes, followed by a space, punctuation or the end of the text
    r"make (?P<target>check|map) PUZZLE=(?P<puzzle>[^\s,;)]+?)(?P<file> FILE=(?:'[^']*'|\S+?))?"
    r"(?: ARGS='(?P<args>[^']*)')?(?=[\s,;)]|\.(?:\s|$)|$)"
)


def _rewrite_commands(v: Verdict, again: Callable[[re.Match[str]], str]) -> None:
    """Every command in the summary, the details and each case's details, as `again` writes it."""
    v.summary = _COMMAND.sub(again, v.summary)
    v.details = [_COMMAND.sub(again, line) for line in v.details]
    for case in v.cases:
        case.details = [_COMMAND.sub(again, line) for line in case.details]


def repeat_earlier(v: Verdict, earlier: str) -> None:
    """Give every command `v` suggests the --earlier file the check used (`make_command` wrote them without it)."""
    if not earlier:
        return
    v.earlier = earlier

    def again(match: re.Match[str]) -> str:
        if match["puzzle"] != str(v.puzzle):  # a command for the step itself (9a) takes no --earlier
            return match[0]
        file = shlex.split(match["file"][6:])[0] if match["file"] else ""
        return make_command(match["target"], match["puzzle"], file, match["args"] or "", earlier)

    _rewrite_commands(v, again)


def repeat_seed(v: Verdict) -> None:
    """In a debugging run, give every command `v` suggests the run's --seed (a command that has one keeps it), so
    that it repeats the same inputs."""
    if not v.debugging or v.seed is None:
        return

    def again(match: re.Match[str]) -> str:
        given = match["args"] or ""
        if "--seed" in given.split():
            return match.group(0)
        file = shlex.split(match["file"][6:])[0] if match["file"] else ""
        return make_command(match["target"], match["puzzle"], file, f"{given} --seed {v.seed}".strip())

    _rewrite_commands(v, again)


def repeat_case(v: Verdict, case: int | None) -> None:
    """After a check of one case (--case K), give every check command `v` suggests for this puzzle that case too."""
    if case is None:
        return
    v.only_case = case

    def again(match: re.Match[str]) -> str:
        given = match["args"] or ""
        if match["target"] != "check" or match["puzzle"] != str(v.puzzle) or "--case" in given.split():
            return match.group(0)
        file = shlex.split(match["file"][6:])[0] if match["file"] else ""
        return make_command("check", match["puzzle"], file, f"--case {case} {given}".strip())

    _rewrite_commands(v, again)


def header(puzzle: int, title: str, mode: str, device: str) -> str:
    head = f"Puzzle {puzzle}" + (f" ({title})" if title else "")
    if mode == "gpu":
        return f"{head}: graded on {device}"
    if mode:
        return f"{head}: graded in Triton's CPU interpreter (small sizes; speed is not graded)"
    return head


def case_line(case: CaseResult) -> str:
    mark = "ok  " if case.passed else "FAIL"
    return f"  [{mark}] case {case.index + 1}: {case.description}  ({case.seconds:.2f} s)"


def progress_printer(number: int, title: str) -> Callable[[dict[str, Any]], None]:
    """Print the grader's events as they come: the header, then one line per finished case."""

    def show(event: dict[str, Any]) -> None:
        if event["event"] == "machine":
            print(header(number, title, event["mode"], event["name"]), flush=True)
        elif event["event"] == "case":
            print(case_line(CaseResult(**{k: v for k, v in event.items() if k != "event"})), flush=True)
        elif event["event"] == "stage":
            print(event["text"], flush=True)

    return show


def puzzle_literal(puzzle: int | str) -> str:
    """How a notebook names the puzzle in code: 7, or "10a"."""
    return str(puzzle) if str(puzzle).isdigit() else f'"{puzzle}"'


OVERFLOW = (
    "exp overflowed to inf: subtract the row max first (exp(x) is inf for x above about 88.7 in float32 and "
    "11.1 in float16; after the max is subtracted every exponent is <= 0)."
)


def explain_printed(printed: str) -> list[str]:
    """A sentence for the warnings a learner cannot act on as printed."""
    if "overflow encountered in exp" in printed:  # its inf then makes the NaN of any 'invalid value' warning
        return [f"(The 'overflow' warning: {OVERFLOW})"]
    if "invalid value encountered" in printed:
        return [
            "(The 'invalid value' warning is a NaN made by arithmetic such as -inf - (-inf) or 0 * inf, usually "
            "a row or block whose every score is masked to -inf: subtract a finite max there.)"
        ]
    return []


def format_verdict(v: Verdict, title: str = "", cases_shown: bool = False) -> str:
    """The terminal report: one line per case, the first failure in detail, then the summary.

    With cases_shown, the header and case lines were already printed as progress.
    """
    out: list[str] = [] if cases_shown else [header(v.puzzle, title, v.mode, v.device)]
    failed = [c for c in v.cases if not c.passed]
    if not cases_shown:
        out += [case_line(c) for c in v.cases]
    if failed and failed[0].details:
        first = failed[0]
        out.append(f"  Where case {first.index + 1} goes wrong:")
        out += [f"    {line}" for line in first.details]
    out += [f"  {line}" for line in v.details]
    if v.timings.get("table"):
        out.append("")
        out += [f"  {line}" for line in v.timings["table"]]
    if failed and failed[0].printed:
        out.append(f"  What your code printed during case {failed[0].index + 1} (last lines):")
        out += [f"    | {line}" for line in failed[0].printed.rstrip().splitlines()[-15:]]
        said = "\n".join(failed[0].details)
        out += [f"  {line}" for line in explain_printed(failed[0].printed) if OVERFLOW not in said]
    elif v.output.strip() and not v.passed:
        out.append("  What your code printed (last lines):")
        out += [f"    | {line}" for line in v.output.rstrip().splitlines()[-15:]]
    out.append("")
    word = {
        PASSED: "PASSED",
        FAILED: "FAILED",
        ERROR: "FAILED",
        TIMEOUT: "FAILED",
        CRASHED: "FAILED",
        TAMPERED: "FAILED",
    }.get(v.status, "NOT GRADED")
    out.append(f"{word}: {v.summary}")
    if v.unsealed:
        out.append(v.unsealed)
    if v.debugging:
        out.append(DEBUGGING_RUN.format(seed=v.seed, aside=" (its timings aside)" if v.mode == "gpu" else ""))
    if v.seed is not None and not v.passed and v.cases:
        only = f"--case {v.only_case} " if v.only_case is not None else ""
        again = make_command("check", v.puzzle, v.file, f"{only}--seed {v.seed}", v.earlier)
        if v.file or v.earlier:  # check() in the notebook would grade the notebook's code, not these files
            out.append(f"({again_words(v)}, run {again})")
        else:
            out.append(
                f"({again_words(v)}, run {again} in a terminal, or call "
                f"check({puzzle_literal(v.puzzle)}, seed={v.seed}) in the notebook)"
            )
    return "\n".join(out)


DEBUGGING_RUN = (
    "This was a debugging run (seed {seed}): the shapes and the data values all come from the seed, so the same "
    "command gives this same report again{aside}; it is not recorded in `make progress`. Check without --seed to "
    "grade your code on fresh data."
)


def again_words(v: Verdict) -> str:
    """What the command that repeats a failed check's seed does: a debugging run on the same inputs."""
    if v.debugging:
        return "to run it again on the same inputs"
    return (
        f"shapes drawn with seed {v.seed}, data values drawn in secret: to debug on the same shapes, with data "
        "values that stay the same from run to run"
    )
