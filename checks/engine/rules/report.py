"""The rules on the grading process's report as a whole: what it must hold before its cases can pass.

Each is a pure function of the checked event stream (`checks.engine.protocol.Stream`); a report that
breaks one was tampered with, since the grading process always writes what they ask for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from checks.engine.rules.problem import Problem

if TYPE_CHECKING:
    from checks.engine.protocol import Stream


def kernels_off_reported(stream: Stream) -> Problem | None:
    """A run that graded the first case also re-ran it with the kernels switched off (the kernels_matter rule's
    observation); a report without that re-run would dodge the rule."""
    if stream.selection[:1] == [0] and stream.kernels_off is None:
        return Problem("the kernels-off re-run is missing")
    return None
