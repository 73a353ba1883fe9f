"""The rule on offsets at the largest sizes: found by the replay's probe (`checks.engine.replay.overflow`), which runs
the programs at the ends of the grids of the plan recorded at the sizes `largest:` in puzzles.yaml names, without
their data, and notes each integer `+`, `-` or `*` that wraps, each address outside every tensor and each grid a GPU
cannot launch. A GPU computes in those integers without a word: the interpreter's small cases never show it.
"""

from __future__ import annotations

from typing import Any

from checks.engine.judging.rules.declare import EVERY_CALL, rule
from checks.engine.judging.rules.problem import CaseContext, Problem

# What an exception says when the host function asked the meta device's stand-ins what only a GPU tensor answers
# (torch.cuda.get_device_properties(q.device), a value of the data): the probe's doing, not the function's
STAND_IN = ("meta", "device")
PROBED = (
    "This is found without allocating those sizes, on the plan your function records there, in the programs at the "
    "ends of each grid."
)
INT64_ADVICE = (
    "Cast a factor to 64 bits before the multiply (`row.to(tl.int64) * stride_m`, `off_z.to(tl.int64) * stride_z`, "
    "`page.to(tl.int64) * stride_page`): Triton computes an int32 program id or loaded index times an int32 stride "
    "in int32. " + PROBED
)


def sizes(ctx: CaseContext) -> str:
    """The largest sizes, as puzzles.yaml gives them, and why they are the largest."""
    largest = ctx.puzzle.largest
    if largest is None:
        return "the puzzle's largest sizes"
    given = {k: v for k, v in largest.given().items() if k != "note"}
    shown = ", ".join(f"{k}={v}" for k, v in given.items())
    return f"the largest sizes the puzzle names ({shown}" + (f": {largest.note}" if largest.note else "") + ")"


def _where(found: dict[str, Any]) -> str:
    kernel, function = str(found.get("kernel", "")), str(found.get("function", ""))
    inside = f"`{kernel}`" + (f" (in `{function}`)" if function and function != kernel else "")
    if not found.get("line"):
        return inside
    text = f": `{found['text']}`" if found.get("text") else ""
    return f"line {found['line']} of {inside}{text}"


@rule(
    EVERY_CALL,
    checks=(
        "at the largest sizes `puzzles.yaml` names (a vocabulary's logits, a KV cache or a packed batch past 2^31 "
        "elements), no offset wraps its integer type, no address leaves its tensor and no grid has more programs "
        "than a GPU launches"
    ),
    message=(
        "Compute offsets that can pass 2^31 elements in 64-bit integers: on a GPU an int32 product wraps around "
        "without a word and the load reads another tensor's memory."
    ),
    taught_in="3",
)
def offsets_fit(ctx: CaseContext) -> Problem | None:
    """The first finding of the probe at the largest sizes (`CaseObservation.overflow`), in words."""
    found = ctx.obs.overflow
    if not found:
        return None
    # a wrap found before the probe ran out is the clearer message; "spent" says only what could not be checked
    first = next((f for f in found if f["kind"] not in ("raised", "spent")), None) or next(
        (f for f in found if f["kind"] == "spent"), found[0]
    )
    at = sizes(ctx)
    kind = first["kind"]
    if kind == "wrap":
        sign = {"mul": "*", "add": "+", "sub": "-"}.get(str(first.get("op")), str(first.get("op")))
        bits = int(first.get("bits", 32))
        worked = f"{first['a']} {sign} {first['b']} = {first['result']}"
        return Problem(
            f"At {at}, {_where(first)} computes an int{bits} {'product' if sign == '*' else 'sum'} that wraps around: "
            f"{worked} is past 2^{bits - 1} - 1 (program {tuple(first['program'])}). {INT64_ADVICE}",
            cause=True,
        )
    if kind == "outside":
        return Problem(
            f"At {at}, a load or store at {_where(first)} reaches an address outside every tensor "
            f"(program {tuple(first['program'])}, {first.get('lanes', 0)} lanes): an offset there wrapped around or "
            f"was cast to fewer bits. {INT64_ADVICE}",
            cause=True,
        )
    if kind == "grid":
        return Problem(
            f"At {at}, the grid of `{first['kernel']}` has {first['count']} programs along axis {first['axis']}, and "
            f"a GPU launches at most {first['limit']} along it (2^31 - 1 along axis 0, 65535 along axes 1 and 2). "
            "Put the axis that grows with the batch and the heads first in the grid (axis 0, `tl.program_id(0)`). "
            + PROBED,
            cause=True,
        )
    if kind == "spent":
        launches = int(first.get("launches", 1))
        return Problem(
            f"At {at}, the programs at the ends of the grids of your function's first {launches} "
            f"{'launch' if launches == 1 else 'launches'} made more than {first['accesses']} loads and stores, the "
            f"most the grader follows; it stopped at {_where(first)} (program {tuple(first['program'])}), so the "
            "offsets of what runs from there on (and of kernels that read what was still being built) are not "
            "checked, and a check cannot pass unchecked. A loop that walks every sequence, block or page in one "
            "program, or a launch per sequence, does that: spread that work over the programs of one grid (each "
            "computes its own entry), or build a list on the host from the metadata, as serving engines do. " + PROBED
        )
    if kind == "host_raised":
        if any(word in str(first["text"]) for word in STAND_IN):
            return None  # it asked the stand-ins what a GPU tensor answers (the GPU's properties, the data): not judged
        where = f" ({first['where'][0]})" if first.get("where") else ""
        return Problem(
            f"At {at}, your function raised {first['text']}{where}: it must run at every size the puzzle names. "
            + PROBED
        )
    return None  # the kernels failed on the probe's stand-in values: nothing is judged of them
