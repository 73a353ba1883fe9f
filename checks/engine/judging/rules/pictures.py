"""What a failure's picture is, and what it is drawn from.

A rule declares its picture beside it (`checks.engine.judging.rules.declare`): one of the kinds below, or none.
`ERROR_MAP` and `OVERHANG` are drawn by `checks.learner.picture` from the data the rule attaches to its
problem (the judge saves it for `--picture`): an error map of wrong or unwritten values (`rules.core.values`),
or a tensor's size and the runs of elements written past its end (`rules.core.no_write_outside`).
`ACCESS_MAP` is the access map of the failing case, recorded again and drawn by `make map` and show(N)
(`checks.learner.maps`, in the layout the puzzle's `map:` in puzzles.yaml names); its rule attaches no data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from checks.engine.contract.observations import BufferObs
from checks.engine.judging.rules.problem import CaseContext


@dataclass(frozen=True)
class PictureKind:
    """One kind of picture a failure can have."""

    name: str  # the `kind` of the picture's data, for the kinds drawn from it
    shows: str  # what it shows, as the end of "To see ..., draw it"
    from_problem: bool  # drawn from the data the rule attaches to its problem; else recorded again (the access map)


ERROR_MAP = PictureKind("error_map", "where the output is wrong", from_problem=True)
OVERHANG = PictureKind("overhang", "which elements past the tensor's end your kernel wrote", from_problem=True)
ACCESS_MAP = PictureKind("access_map", "which program loaded what", from_problem=False)


def overhang_picture(ctx: CaseContext, buf: BufferObs, headline: str) -> dict[str, Any]:
    """What `checks.learner.picture` draws for a write past the end: the tensor's elements, then the overhang."""
    owned = buf.output is not None and 0 <= buf.output < len(ctx.expected)
    name = ctx.expected[buf.output].name if owned else buf.label
    return {
        "kind": OVERHANG.name,
        "size": buf.numel,
        "spans": list(buf.after_spans),
        "name": name,
        "headline": headline,
        "blocks": launch_blocks(ctx),
    }


def launch_blocks(ctx: CaseContext) -> dict[str, int]:
    """The BLOCK_* constants the learner's own kernels were launched with (by keyword), for a picture's grid."""
    blocks: dict[str, int] = {}
    for launch in ctx.obs.launches:
        if launch.own:
            blocks.update(launch.blocks)
    return blocks
