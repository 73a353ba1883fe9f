"""What a failure's picture is drawn from: the data a rule attaches to its problem for `checks.learner.picture`.

A picture file holds either an error map (wrong or unwritten values; `rules.core.values`) or, with
`kind: overhang`, a tensor's size and the runs of elements written past its end (`rules.core.no_write_outside`).
"""

from __future__ import annotations

from typing import Any

from checks.engine.observations import BufferObs
from checks.engine.rules.problem import CaseContext

DRAWN_KINDS = {"overhang"}  # pictures other than error maps that the failure picture can draw


def drawable(picture: dict[str, Any] | None) -> bool:
    """Whether `checks.learner.picture` can draw this problem's picture (method rules draw access maps instead)."""
    return picture is not None and ("error" in picture or picture.get("kind") in DRAWN_KINDS)


def overhang_picture(ctx: CaseContext, buf: BufferObs, headline: str) -> dict[str, Any]:
    """What `checks.learner.picture` draws for a write past the end: the tensor's elements, then the overhang."""
    owned = buf.output is not None and 0 <= buf.output < len(ctx.expected)
    name = ctx.expected[buf.output].name if owned else buf.label
    return {
        "kind": "overhang",
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
