"""What a rule declares beside its function: its name, when it applies, what it needs, the learner's message, its
picture and its row of the reference page. Every other part of the grader asks the rulebook for these.

    @rule(
        ON_REQUEST,
        needs=(ACCESS_LOG,),
        picture=ACCESS_MAP,
        checks="when a head's keys span many blocks, several programs share them",
        message="Split the keys of each head over several programs: ...",
    )
    def split_kv(ctx: CaseContext, min_n: int = 256, message: str | None = None) -> Problem | None:
        ...
        return Problem(say(message, split_kv.message, measured))

The rule's name is its function's name: what verdicts, `expect:` lines of known-wrong kernels and the `rules:`
entries of puzzles.yaml call it. The decorated name is a `Rule`, called like the function. Its place in the
rulebook is its priority (the first rule a call breaks is the one reported): an EVERY_CALL rule's place is its
entry in `checks.engine.judging.rules.rulebook.ORDER`; the ON_REQUEST rules follow them in the order they are declared
(the modules of `rulebook.MODULES` in turn, each from its top), and `before=another_rule.name` puts one ahead of
the rule it names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from checks.engine.judging.rules.pictures import ACCESS_MAP, PictureKind
from checks.engine.judging.rules.problem import CaseContext, Problem

EVERY_CALL = "every call"  # every puzzle applies it to every graded call
ON_REQUEST = "on request"  # a puzzle applies it when its `rules:` entry in puzzles.yaml names it

ACCESS_LOG = "access log"  # the interpreter's access log (on a GPU there is none, and the rule says nothing)

# What a rule may need, and whether a call has it. A rule is applied only where the call has all it needs.
NEEDS: dict[str, Callable[[CaseContext], bool]] = {
    ACCESS_LOG: lambda ctx: bool(ctx.obs.access),
}


@dataclass(frozen=True)
class Rule:
    """One rule: its check function and what the rest of the grader needs to know about it."""

    name: str
    check: Callable[..., Problem | None]  # (ctx, **the puzzle's parameters) -> Problem | None
    applies: str  # EVERY_CALL or ON_REQUEST
    checks: str  # the reference page's row: what it checks, in the learner's words (markdown)
    message: str  # what to do when it fails, one or two sentences; a puzzle's `message:` may replace it
    taught_in: str = ""  # the puzzle that teaches it; for an ON_REQUEST rule, the first puzzle that asks for it
    needs: tuple[str, ...] = ()  # keys of NEEDS
    picture: PictureKind | None = None  # what shows its failure best (checks.engine.judging.rules.pictures)
    explains_gpu_values: bool = False  # found in the interpreter, it says why a GPU case failed (values, a fault)
    explained_by_interpreter: bool = False  # failed on a GPU, a rule that explains_gpu_values may name the cause
    before: str = ""  # an ON_REQUEST rule: the rule it is checked before, where declaration order says otherwise

    def __call__(self, ctx: CaseContext, **params: Any) -> Problem | None:
        return self.check(ctx, **params)

    def can_judge(self, ctx: CaseContext) -> bool:
        """Whether the call has everything the rule needs."""
        return all(NEEDS[need](ctx) for need in self.needs)

    @property
    def needs_access_log(self) -> bool:
        return ACCESS_LOG in self.needs

    @property
    def draws_map(self) -> bool:
        """Its failure is shown by the access map of the failing case (in the interpreter)."""
        return self.picture == ACCESS_MAP


def rule(
    applies: str,
    *,
    checks: str,
    message: str,
    taught_in: str = "",
    needs: tuple[str, ...] = (),
    picture: PictureKind | None = None,
    explains_gpu_values: bool = False,
    explained_by_interpreter: bool = False,
    before: str = "",
) -> Callable[[Callable[..., Problem | None]], Rule]:
    """Declare the function below as a rule named after it (see the module's docstring)."""
    if applies not in (EVERY_CALL, ON_REQUEST):
        raise ValueError(f"a rule applies to {EVERY_CALL!r} or {ON_REQUEST!r}, not {applies!r}")
    unknown = set(needs) - set(NEEDS)
    if unknown:
        raise ValueError(f"a rule needs only what NEEDS lists, not {sorted(unknown)}")
    if before and applies != ON_REQUEST:
        raise ValueError("only an ON_REQUEST rule takes `before`: an EVERY_CALL rule's place is its entry in ORDER")

    def declare(check: Callable[..., Problem | None]) -> Rule:
        return Rule(
            check.__name__,
            check,
            applies,
            checks=checks,
            message=message,
            taught_in=taught_in,
            needs=tuple(needs),
            picture=picture,
            explains_gpu_values=explains_gpu_values,
            explained_by_interpreter=explained_by_interpreter,
            before=before,
        )

    return declare
