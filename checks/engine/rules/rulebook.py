"""The rulebook: the one place that knows each rule, in the order the rules are checked.

Every rule is one `Entry`: its name (what verdicts, `expect:` lines and puzzles.yaml call it), its check
function, when it applies, and what the grader does around it. Every puzzle applies the rules that apply
to `EVERY_CALL`: first those on the recorded plan (found before anything is replayed), then those on the
replay's outputs and access log; a puzzle applies an `ON_REQUEST` rule when its `rules:` entry in puzzles.yaml
names it, with the entry's parameters (checked against the function's signature when this module loads). An
`OUTCOME` has no check function here: the grader reaches it itself (the call raised, the stub, the speed bar,
the interpreter stage), and it is listed so that every reason a verdict can give is a name in this book.

Adding a rule is one function (in a module of this package) and one `Entry` here.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

from checks import verdict as V
from checks.engine.rules import core, decoding, launch_order, method, plan_rules
from checks.engine.rules.problem import CaseContext, Problem, Rule
from checks.registry import Puzzle, load_puzzles

EVERY_CALL = "every call"
ON_REQUEST = "on request"  # when the puzzle's `rules:` entry names it
OUTCOME = "outcome"  # reached by the grader itself, not by a check function


@dataclass(frozen=True)
class Entry:
    name: str
    check: Rule | None  # CaseContext (and the puzzle's parameters) -> Problem | None; None for an outcome
    applies: str  # EVERY_CALL, ON_REQUEST or OUTCOME
    needs_access_log: bool = False  # reads the interpreter's access log: silent on a GPU, where there is none
    draws_map: bool = False  # its failure is shown best by the access map of the failing case (in the interpreter)
    explains_gpu_values: bool = False  # found in the interpreter, it says why a GPU case gave wrong values


BOOK: tuple[Entry, ...] = (
    # the plan, before anything is replayed (checks.engine.judging.plans)
    Entry("kernel_calls", plan_rules.kernel_calls, EVERY_CALL),
    Entry("kernels_from_source", plan_rules.kernels_from_source, EVERY_CALL),
    Entry("torch_free", plan_rules.torch_free, EVERY_CALL),
    Entry("plan_from_shapes", plan_rules.plan_from_shapes, EVERY_CALL),
    # the replay's outputs and access log
    Entry("kernel_launched", core.kernel_launched, EVERY_CALL),
    Entry("no_write_outside", core.no_write_outside, EVERY_CALL, explains_gpu_values=True),
    Entry("inputs_unchanged", core.inputs_unchanged, EVERY_CALL, explains_gpu_values=True),
    Entry("no_load_outside", core.no_load_outside, EVERY_CALL, needs_access_log=True, explains_gpu_values=True),
    Entry("output_form", core.output_form, EVERY_CALL),
    Entry("values", core.values, EVERY_CALL),
    Entry("limits", core.limits, ON_REQUEST, needs_access_log=True, draws_map=True),
    Entry("grouped_order", launch_order.grouped_order, ON_REQUEST, needs_access_log=True, draws_map=True),
    Entry("causal_skipping", method.causal_skipping, ON_REQUEST, needs_access_log=True, draws_map=True),
    Entry("parallel_over_queries", method.parallel_over_queries, ON_REQUEST, needs_access_log=True, draws_map=True),
    Entry("p_never_stored", method.p_never_stored, ON_REQUEST, needs_access_log=True, draws_map=True),
    # before split_kv: reading slots past seq_lens also raises the read count, and is the cause to name
    Entry(  # a page no sequence owns holds NaN, and a page number past the table faults on a GPU
        "pages_in_table",
        decoding.pages_in_table,
        ON_REQUEST,
        needs_access_log=True,
        draws_map=True,
        explains_gpu_values=True,
    ),  # fmt: skip
    Entry("kv_once_per_group", decoding.kv_once_per_group, ON_REQUEST, needs_access_log=True, draws_map=True),
    Entry("split_kv", decoding.split_kv, ON_REQUEST, needs_access_log=True, draws_map=True),
    Entry("raised", None, OUTCOME),  # the call raised an exception (an error verdict)
    Entry("stub", None, OUTCOME),  # the code is still the stub: nothing was graded
    Entry("speed_bar", None, OUTCOME),  # on a GPU, slower than the puzzle's bar (checks.engine.judging.timing)
    Entry("interpreter_stage", None, OUTCOME),  # on a GPU, the interpreter stage must pass too (see below)
)
RULES: dict[str, Entry] = {entry.name: entry for entry in BOOK}

# Statuses that may reject a known-wrong kernel besides a rule (its `expect:` line may name them).
STATUSES = (V.TIMEOUT, V.CRASHED, V.ERROR, V.TAMPERED)
# Interpreter-stage verdicts that do not fail a passing GPU stage: the interpreter could not run, through no
# fault of the code. Any other failure there fails the GPU verdict: the code would otherwise dodge the rules.
INTERPRETER_STAGE_EXCUSED = (V.ENVIRONMENT, V.INTERNAL)


class RuleFailed(Exception):
    """A rule raised instead of returning a problem or None: a bug in the grader, never the learner's."""

    def __init__(self, rule: str, error: BaseException) -> None:
        super().__init__(f"{rule}: {type(error).__name__}: {error}")
        self.rule, self.error = rule, error


def checked(applies: str) -> list[Entry]:
    """The entries with a check function that apply `applies`, in order."""
    return [entry for entry in RULES.values() if entry.applies == applies and entry.check is not None]


def all_rules() -> dict[str, Rule]:
    """Every rule on the learner's calls (a known-wrong kernel can break it), by name."""
    return {e.name: e.check for e in RULES.values() if e.check is not None}


def reasons() -> set[str]:
    """Every name a rejection can give: the rules, the outcomes, the statuses."""
    return set(RULES) | set(STATUSES)


def outcome(name: str) -> str:
    """The name of an outcome (or rule) as the rulebook has it; a KeyError for a name it does not have."""
    return RULES[name].name


def names(**flags: bool) -> set[str]:
    """The rules whose flags match, e.g. names(draws_map=True)."""
    return {e.name for e in RULES.values() if all(getattr(e, flag) == value for flag, value in flags.items())}


def apply(entry: Entry, ctx: CaseContext, params: dict[str, Any]) -> Problem | None:
    """One rule on one call; its problem named after it. An exception in the rule is a `RuleFailed`."""
    assert entry.check is not None
    if entry.needs_access_log and not ctx.obs.access:
        return None
    try:
        problem = entry.check(ctx, **params)
    except Exception as exc:  # any error in a rule is the grader's, reported as such
        raise RuleFailed(entry.name, exc) from exc
    if problem is not None:
        problem.rule = entry.name
    return problem


def first_problem(ctx: CaseContext) -> Problem | None:
    """The first rule the call breaks, in rulebook order, or None when it keeps them all."""
    requested = ctx.puzzle.rules
    for entry in checked(EVERY_CALL):
        problem = apply(entry, ctx, {})
        if problem is not None:
            return problem
    for entry in checked(ON_REQUEST):
        if entry.name in requested:
            problem = apply(entry, ctx, requested[entry.name])
            if problem is not None:
                return problem
    return None


def parameter_problems(puzzles: tuple[Puzzle, ...] | list[Puzzle]) -> list[str]:
    """What is wrong with the puzzles' `rules:` entries: unknown rules, or parameters their function does not take."""
    problems = []
    for puzzle in puzzles:
        for name, params in puzzle.rules.items():
            entry = RULES.get(name)
            if entry is None or entry.applies != ON_REQUEST or entry.check is None:
                problems.append(
                    f"puzzle {puzzle.number}: `rules:` names {name!r}, which is not a rule a puzzle asks for"
                )
                continue
            try:
                inspect.signature(entry.check).bind(None, **(params or {}))
            except TypeError as exc:
                problems.append(f"puzzle {puzzle.number}: the parameters of {name} in puzzles.yaml do not fit: {exc}")
    return problems


class RulebookError(ValueError):
    """puzzles.yaml asks for a rule that is not in the rulebook, or gives one parameters it does not take."""


def check_registry(puzzles: tuple[Puzzle, ...] | list[Puzzle]) -> None:
    problems = parameter_problems(puzzles)
    if problems:
        raise RulebookError("puzzles.yaml does not fit the rulebook:\n  " + "\n  ".join(problems))


check_registry(load_puzzles())  # a wrong parameter in puzzles.yaml stops every grade at once, not one case later
