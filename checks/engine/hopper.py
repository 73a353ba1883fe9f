"""Where the Hopper track (16a, 16b, 16) can be graded: on a Hopper GPU only.

Those steps are written in Gluon (`triton.experimental.gluon`), whose kernels name Hopper's own units (TMA, wgmma,
mbarriers, warp specialisation): Triton's interpreter cannot run them, and a GPU of another generation has no such
units. Everywhere else a check of one of them gives `needs_hopper_verdict`: one sentence that says so, no grading.
"""

from __future__ import annotations

import os

from checks import verdict as V
from checks.registry import Puzzle

HOPPER_MAJOR = 9  # compute capability 9.x: H100, H200, GH200
# what a Hopper step's verdict says in place of the interpreter stage's line
GPU_ONLY = (
    "No interpreter stage: Triton's interpreter cannot run Gluon, so this step is judged on the GPU alone (values, "
    "the guard bands around every tensor, speed); a load outside a tensor shows only in the values it gives."
)


def hopper_here(interpret: bool = False) -> bool:
    """Whether this process can run Gluon's Hopper kernels: a CUDA GPU of compute capability 9.x, and not Triton's
    interpreter (asked for with `interpret` or TRITON_INTERPRET=1)."""
    if interpret or os.environ.get("TRITON_INTERPRET") == "1":
        return False
    import torch

    return torch.cuda.is_available() and torch.cuda.get_device_capability()[0] == HOPPER_MAJOR


def needs_hopper_sentence(puzzle: Puzzle) -> str:
    """The one sentence a check of a Hopper step says where it cannot be graded."""
    return (
        f"Puzzle {puzzle.number} needs a Hopper GPU (an H100 or H200) and is not graded here: it is "
        "written in Gluon, whose kernels use Hopper's TMA, mbarriers and warpgroup MMA, which Triton's interpreter "
        f"cannot run; run `make check PUZZLE={puzzle.number}` on a machine with a Hopper GPU."
    )


def needs_hopper_verdict(puzzle: Puzzle, interpret: bool = False) -> V.Verdict | None:
    """The verdict of a check of `puzzle` that cannot be graded here (a Hopper step away from a Hopper GPU), or None
    when it can be."""
    if not puzzle.needs_hopper or hopper_here(interpret):
        return None
    return V.Verdict(puzzle.number, V.NEEDS_HOPPER, needs_hopper_sentence(puzzle), rule=V.NEEDS_HOPPER)
