"""The rules a graded call must satisfy: pure functions from observations to a problem or None.

Each rule takes a `CaseContext` (what the parent re-derived itself, plus what the grading process
observed) and keyword parameters from the puzzle's `rules:` entry in `puzzles.yaml`, and returns
a `Problem` or None; it is declared beside its function (`checks.engine.judging.rules.declare`), and the rulebook
(`checks.engine.judging.rules.rulebook`) names the rule on the problem.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from checks.engine.contract.observations import CaseObservation


@dataclass
class Problem:
    message: str  # one sentence: what is wrong and what to change
    details: list[str] = field(default_factory=list)
    picture: dict[str, Any] | None = None  # the data of a picture drawn from the problem (rules.pictures)
    rule: str = ""  # the rulebook's name of the rule that found it, filled in by the rulebook
    cause: bool = False  # the details name the cause (a scale left out, an overflow...): no case split beside it
    diagnosed: bool = False  # the message says why the values are wrong, beyond where (the merge, an overflow...)
    fits: dict[str, str] = field(default_factory=dict)  # mistake -> sentence: those that give these values
    degenerate: bool = False  # a case too small to tell mistakes apart (rules.mistakes.degenerate)
    stated: str = ""  # the mistake whose sentence details[0] is, named only if it fits every failing case


@dataclass
class CaseContext:
    """One graded call as the parent sees it."""

    puzzle: Any  # checks.registry.Puzzle
    case: Any  # checks.registry.Case: the case's entry in puzzles.yaml
    inputs: dict[str, Any]  # re-derived from the seed in the parent (tensors and scalars)
    expected: list[Any]  # checks.puzzles.Expected, computed in the parent
    outputs: list[Any]  # what the learner's function returned, loaded from the observation
    obs: CaseObservation
    fresh_outputs: list[Any] | None = None  # the same call from its kept tensors' first state (obs.fresh_outputs)
    reversed_outputs: list[Any] | None = None  # the same call, the programs last to first (obs.reversed_outputs)
    interleaved_outputs: list[Any] | None = None  # the same call, interleaved at atomics (obs.interleaved_outputs)


def say(message: str | None, default: str, measured: str) -> str:
    """A rule's sentence: the puzzle's own message (puzzles.yaml) or the rule's declared one, then what was
    measured."""
    return f"{message or default} {measured}".strip()
