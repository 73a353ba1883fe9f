"""The provenance rules: what the kernels read, and what the function returns, came from the learner's kernels.

Pure functions of the observation (`host_reads`, `output_origins`, gathered in the grading process by
`checks.engine.child.fingerprints` from fingerprints of memory, so that arithmetic no torch watcher sees, in
numpy, in Python lists, in another thread or with torch's dispatch switched off, is found all the same).
"""

from __future__ import annotations

from checks.engine.rules.problem import CaseContext, Problem

# how each origin other than "kernel" came about, for the message about a returned output
_OUTPUT_ORIGINS = {
    "host": "was changed outside your kernels after your last kernel wrote it (by torch, numpy, a copy or "
    "another thread)",
    "unseen": "is a tensor none of your kernels ever received: its values were computed outside a kernel",
    "input": "is an input none of your kernels wrote",
    "fill": "was allocated and never written by your kernels",
    "copy": "is a copy your code made of an input, never written by your kernels",
}


def kernels_read_inputs(ctx: CaseContext) -> Problem | None:
    """Every tensor a kernel of the learner received is an input, a constant fill, a layout copy of an input,
    or memory only the learner's kernels have written since it was made."""
    reads = ctx.obs.host_reads
    if not reads:
        return None
    return Problem(
        f"Your kernel received values computed outside a kernel ({reads[0]}): the wrapper may only allocate, "
        "fill with a constant, copy layouts and launch; compute these values inside a kernel.",
        [f"Also {read}" for read in reads[1:]],
    )


def outputs_from_kernels(ctx: CaseContext) -> Problem | None:
    """Every returned tensor holds what the learner's kernels last stored there, unchanged since, or is a
    layout or dtype copy of such a tensor (.to, .contiguous, copy_ of a kernel's result)."""
    for index, origin in enumerate(ctx.obs.output_origins):
        if origin in ("kernel", "kernel copy", ""):
            continue
        name = ctx.expected[index].name if index < len(ctx.expected) else f"output {index + 1}"
        how = _OUTPUT_ORIGINS.get(origin, f"came from {origin}")
        return Problem(
            f"The {name} you returned {how}: return the tensor your kernel stored the answer in, and change "
            "nothing in it after the launch.",
        )
    return None
