"""The rulebook: every rule's name in the order the rules are checked, and what the grader asks about them.

A rule is declared where it is defined (`checks.engine.judging.rules.declare`): its function, and beside it when it
applies, what it needs, the learner's message, its picture and its row of the reference page. This book only
gives each rule its place: `ORDER` is the priority, and the first rule a call breaks is the one reported. Every
puzzle applies the `EVERY_CALL` rules: first those on the recorded plan (found before anything is replayed), then
those on the replay's outputs and access log; a puzzle applies an `ON_REQUEST` rule when its `rules:` entry in
puzzles.yaml names it, with the entry's parameters (checked against the function's signature when this module
loads). An outcome is no rule: the grader reaches it itself (the call raised, the speed bar), and it is listed so
that every reason a verdict can give is a name in this book.

Everything else asks this module: the judge (`first_problem`), the verdict's wording and the access map
(`names`), `make solutions` (`reasons`), the picture advice (`picture_of`) and the reference page's rule index
(`checks.authoring.build`, from `RULES` and `taught_in`). docs/adding-a-rule.md walks through adding a rule.
"""

from __future__ import annotations

import inspect
from typing import Any

from checks import verdict as V
from checks.engine.judging.rules import core, decoding, launch_order, method, overflow, plan_rules, prefill, races
from checks.engine.judging.rules.declare import EVERY_CALL, ON_REQUEST, Rule
from checks.engine.judging.rules.pictures import PictureKind
from checks.engine.judging.rules.problem import CaseContext, Problem
from checks.registry import Puzzle, RegistryError, load_puzzles

MODULES = (plan_rules, core, races, overflow, launch_order, method, decoding, prefill)  # the modules that declare rules

# The rules every call is checked by, in the order they are checked. The rules a puzzle asks for (ON_REQUEST)
# come after them, in the order their modules declare them (see checks.engine.judging.rules.declare).
ORDER: tuple[str, ...] = (
    # the plan, before anything is replayed (checks.engine.judging.plans)
    "kernel_calls",
    "mma_waited",
    "kernels_from_source",
    "torch_free",
    "plan_from_shapes",
    # the replay's outputs and access log
    "kernel_launched",
    "no_write_outside",
    "inputs_unchanged",
    "no_load_outside",
    "no_race",
    "output_form",
    "kept_state",
    "values",
    "outputs_stored",
    "offsets_fit",
)

# What a verdict may name besides a rule: reached by the grader itself, with no check function.
OUTCOMES = {
    "raised": "the call raised an exception (an error verdict)",
    "speed_bar": "on a GPU, slower than the puzzle's bar (checks.engine.judging.timing)",
    "stub": "the code is still the stub as handed out (an error verdict; `make progress` shows 'not started')",
    "too_many_configs": (
        "an autotuned launch with more configs that differ in their arguments than the interpreter judges "
        "(checks.engine.judging.configs.CONFIG_LIMIT): a GPU may choose one never judged"
    ),
}
# Statuses that may reject a known-wrong kernel besides a rule (its `expect:` line may name them).
STATUSES = (V.TIMEOUT, V.CRASHED, V.ERROR, V.TAMPERED)
# Interpreter-stage verdicts that do not fail a passing GPU stage: the interpreter could not run, through no
# fault of the code. Any other failure there fails the GPU verdict: the code would otherwise dodge the rules.
INTERPRETER_STAGE_EXCUSED = (V.ENVIRONMENT, V.INTERNAL)


class RulebookError(ValueError):
    """The rulebook does not fit the declared rules, or puzzles.yaml asks for a rule it lacks or gives one
    parameters it does not take."""


class RegistryRulesError(RulebookError, RegistryError):
    """puzzles.yaml asks for a rule the rulebook lacks, or gives one parameters it does not take: a broken registry,
    as a misspelt key is."""


def declared_rules() -> dict[str, Rule]:
    """Every rule the modules of `MODULES` declare, by name."""
    found: dict[str, Rule] = {}
    for module in MODULES:
        for value in vars(module).values():
            if isinstance(value, Rule) and value.check.__module__ == module.__name__:
                found[value.name] = value
    return found


def order_problems(order: tuple[str, ...], declared: dict[str, Rule]) -> list[str]:
    """What is wrong with `order` against the declared rules: an EVERY_CALL rule left out, a name twice, a name not
    declared or not of an EVERY_CALL rule, a `before` that names no requested rule."""
    problems = [
        f"the rule {name!r} ({declared[name].check.__module__}) applies to every call but is not in ORDER in "
        "checks/engine/judging/rules/rulebook.py: add its name where its priority puts it"
        for name, rule in declared.items()
        if rule.applies == EVERY_CALL and name not in order
    ]
    problems += [f"ORDER names {name!r} twice" for name in sorted({n for n in order if order.count(n) > 1})]
    problems += [f"ORDER names {name!r}, which no module of MODULES declares" for name in order if name not in declared]
    problems += [
        f"ORDER names {name!r}, a rule puzzles ask for: its declaration places it (before=...), not ORDER"
        for name in order
        if name in declared and declared[name].applies != EVERY_CALL
    ]
    problems += [
        f"the rule {name!r} is declared before={rule.before!r}, which is not a rule puzzles ask for"
        for name, rule in declared.items()
        if rule.before and (rule.before not in declared or declared[rule.before].applies != ON_REQUEST)
    ]
    return problems


def requested_order(declared: dict[str, Rule]) -> list[str]:
    """The ON_REQUEST rules in declaration order, each with a `before` moved just ahead of the rule it names."""
    names = [name for name, rule in declared.items() if rule.applies == ON_REQUEST]
    for name in [n for n in names if declared[n].before]:
        names.remove(name)
        names.insert(names.index(declared[name].before), name)
    return names


def _book() -> dict[str, Rule]:
    declared = declared_rules()
    problems = order_problems(ORDER, declared)
    if problems:
        raise RulebookError("The rulebook does not fit the declared rules:\n  " + "\n  ".join(problems))
    return {name: declared[name] for name in (*ORDER, *requested_order(declared))}


RULES: dict[str, Rule] = _book()  # every rule, by name, in the order they are checked


class RuleFailed(Exception):
    """A rule raised instead of returning a problem or None: a bug in the grader, never the learner's."""

    def __init__(self, rule: str, error: BaseException) -> None:
        super().__init__(f"{rule}: {type(error).__name__}: {error}")
        self.rule, self.error = rule, error


def checked(applies: str) -> list[Rule]:
    """The rules that apply `applies` (EVERY_CALL or ON_REQUEST), in order."""
    return [rule for rule in RULES.values() if rule.applies == applies]


def all_rules() -> dict[str, Rule]:
    """Every rule on the learner's calls (a known-wrong kernel can break it), by name."""
    return dict(RULES)


def reasons() -> set[str]:
    """Every name a rejection can give: the rules, the outcomes, the statuses."""
    return set(RULES) | set(OUTCOMES) | set(STATUSES)


def outcome(name: str) -> str:
    """The name of an outcome as the rulebook has it; a KeyError for a name it does not have."""
    if name not in OUTCOMES:
        raise KeyError(name)
    return name


def names(**flags: bool) -> set[str]:
    """The rules whose flags match, e.g. names(draws_map=True) (see `checks.engine.judging.rules.declare.Rule`)."""
    return {r.name for r in RULES.values() if all(getattr(r, flag) == value for flag, value in flags.items())}


def picture_of(name: str) -> PictureKind | None:
    """The picture that shows a failure of the rule `name` best; None for a rule without one, or another name."""
    rule = RULES.get(name)
    return rule.picture if rule is not None else None


def taught_in(rule: Rule, puzzles: tuple[Puzzle, ...] | list[Puzzle] | None = None) -> str:
    """The puzzle that teaches the rule: the one it declares, else the first puzzle in course order that asks for it
    ('' when none does)."""
    if rule.taught_in:
        return rule.taught_in
    asking = [p.number for p in (load_puzzles() if puzzles is None else puzzles) if rule.name in p.rules]
    return asking[0] if asking else ""


def apply(rule: Rule, ctx: CaseContext, params: dict[str, Any]) -> Problem | None:
    """One rule on one call; its problem named after it. An exception in the rule is a `RuleFailed`."""
    if not rule.can_judge(ctx):
        return None
    try:
        problem = rule.check(ctx, **params)
    except Exception as exc:  # any error in a rule is the grader's, reported as such
        raise RuleFailed(rule.name, exc) from exc
    if problem is not None:
        problem.rule = rule.name
    return problem


def first_problem(ctx: CaseContext) -> Problem | None:
    """The first rule the call breaks, in rulebook order, or None when it keeps them all."""
    requested = ctx.puzzle.rules
    for rule in RULES.values():
        if rule.applies == EVERY_CALL:
            problem = apply(rule, ctx, {})
        elif rule.name in requested:
            problem = apply(rule, ctx, requested[rule.name] or {})
        else:
            continue
        if problem is not None:
            return problem
    return None


def parameter_problems(puzzles: tuple[Puzzle, ...] | list[Puzzle]) -> list[str]:
    """What is wrong with the puzzles' `rules:` entries: unknown rules, or parameters their function does not take."""
    problems = []
    for puzzle in puzzles:
        for name, params in puzzle.rules.items():
            rule = RULES.get(name)
            if rule is None or rule.applies != ON_REQUEST:
                problems.append(
                    f"puzzle {puzzle.number}: `rules:` names {name!r}, which is not a rule a puzzle asks for"
                )
                continue
            try:
                inspect.signature(rule.check).bind(None, **(params or {}))
            except TypeError as exc:
                problems.append(f"puzzle {puzzle.number}: the parameters of {name} in puzzles.yaml do not fit: {exc}")
    return problems


def check_registry(puzzles: tuple[Puzzle, ...] | list[Puzzle]) -> None:
    """Raise a `RulebookError` listing every `rules:` entry of the puzzles that does not fit the rulebook."""
    problems = parameter_problems(puzzles)
    if problems:
        listed = "; ".join(problems)
        raise RegistryRulesError(f"puzzles.yaml does not fit the rulebook: {listed}. Correct its `rules:`.")


def checked_registry() -> tuple[Puzzle, ...]:
    """The registry's puzzles, their `rules:` checked against the rulebook: every grade starts here, so that a wrong
    parameter in puzzles.yaml stops every grade at once, not one case later. RegistryError (RegistryRulesError for the
    rules) when the registry is broken."""
    puzzles = load_puzzles()
    if not (_checked and _checked[0] is puzzles):
        check_registry(puzzles)
        _checked[:] = [puzzles]
    return puzzles


_checked: list[tuple[Puzzle, ...]] = []  # the registry (load_puzzles's tuple) whose rules were checked last
