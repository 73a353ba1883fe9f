"""The interpreter stage on a GPU machine, its cases dealt to several grading processes.

On a GPU the small CPU cases run in Triton's interpreter beside the GPU stage, one after the other,
and for the attention puzzles that stage ends last (seconds per case). A GPU machine has cores to
spare: the cases are dealt round-robin to a few grading processes (`part_count`, which
`checks.engine.processes.prestart` also uses to start them early), and their verdicts are merged here into the
verdict one process would have given. Part 0 holds case 0, so the kernels-off re-run and the
traffic report stay where they were.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from checks import verdict as V
from checks.engine.judging.wording import failure_pattern

COUNT = re.compile(r"^\d+ of \d+ cases? failed; ")  # how a part's summary counts its own cases


def split_cases(n_cases: int, parts: int) -> list[list[int]]:
    """The case indices of each part, dealt round-robin: part 0 has case 0."""
    parts = max(1, min(parts, n_cases))
    return [list(range(first, n_cases, parts)) for first in range(parts)]


def merge_parts(parts: list[V.Verdict], params: list[dict[str, Any]]) -> V.Verdict:
    """One interpreter-stage verdict from the verdicts of its parts (disjoint sets of the cases `params`).

    It passes when every part passed. Otherwise it is the failing part's verdict that a single process
    would have reported first: tampering, then a part that failed without a failing case (a crash, a time
    limit), then the part with the lowest failing case;
    with the cases of every part, and its counts and failure pattern taken over all of them.
    """
    if len(parts) == 1:
        return parts[0]
    cases = sorted((c for part in parts for c in part.cases), key=lambda c: c.index)
    failed = [part for part in parts if not part.passed]
    if not failed:
        summary = V.all_match(len(cases))
        return replace(parts[0], cases=cases, summary=summary, seconds=max(p.seconds for p in parts))

    def precedence(part: V.Verdict) -> tuple[bool, int]:
        first = min((c.index for c in part.cases if not c.passed), default=-1)
        return part.status != V.TAMPERED, first

    worst = min(failed, key=precedence)
    merged = replace(worst, cases=cases, details=list(worst.details))
    failing = [c for c in cases if not c.passed]
    if failing and COUNT.match(worst.summary):
        merged.summary = COUNT.sub(f"{len(failing)} of {V.plural(len(cases), 'case')} failed; ", worst.summary)
        cause = failing[0].cause
        own = failure_pattern([params[c.index] for c in worst.cases], [c.passed for c in worst.cases], cause)
        merged.details = failure_pattern([params[c.index] for c in cases], [c.passed for c in cases], cause) + [
            line for line in worst.details if line not in own
        ]
    return merged
